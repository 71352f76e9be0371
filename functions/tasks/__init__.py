"""The example app's background tasks (``app.py`` declares them)."""
