"""Observers: long-running ECS tasks kept alive by a DynamoDB registry and a reconciler."""
