"""Observers PART A: registry, API, CLI and container runtime."""
