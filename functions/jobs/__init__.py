"""The team's scheduled jobs: one module each, a ``@scheduled_job`` handler in each."""
