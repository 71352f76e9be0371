"""Tools for people: the operator CLI and the local emulator. Never shipped to Lambda."""
