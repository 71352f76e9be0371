"""The team's background tasks: one module each, a ``@task`` handler in each."""
