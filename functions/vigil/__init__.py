"""Vigil's runtime library: what runs inside Lambda functions and observer containers."""

__version__ = "0.1.0"
