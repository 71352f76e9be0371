"""One way to read a function's environment, and the one error it raises.

Each function (a job, the API, the reconciler, an observer container) reads the variables its
construct set once, at start, into a frozen settings object, through :class:`Environment`. Every
problem becomes a :class:`SettingsError` that names the variable, so a misconfigured deployment
says what to fix.

A leaf module on purpose: it sits on every job's cold-start path, so it imports nothing heavy
(no pydantic, no boto3).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=Enum)


class SettingsError(ValueError):
    """The function's environment, set by its construct, is missing or invalid."""


class Environment:
    """Typed reads of environment variables; an empty value counts as missing."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def gather(self, **readers: Callable[[], Any]) -> dict[str, Any]:
        """Each reader's value under its field name; every problem at once, in one error."""
        values: dict[str, Any] = {}
        problems: list[str] = []
        for field, reader in readers.items():
            try:
                values[field] = reader()
            except SettingsError as error:
                problems.append(str(error))
        if problems:
            raise SettingsError("; ".join(problems))
        return values

    def present(self, name: str) -> bool:
        """Set at all, even to nothing (which the typed reads then refuse)."""
        return name in self._env

    def text(self, name: str, default: str | None = None) -> str:
        """The stripped value; required unless a default is given."""
        value = self._env.get(name, "").strip()
        if value:
            return value
        if default is None:
            raise SettingsError(f"environment variable {name} is required")
        return default

    def parsed(self, name: str, parse: Callable[[str], T], default: T | None = None) -> T:
        """``parse(value)``; its ValueError becomes a SettingsError naming the variable."""
        # Absent means the default; present but empty is a mistake worth refusing (an empty
        # VIGIL_ASSIGN_PUBLIC_IP must not quietly mean a public IP).
        if default is not None and name not in self._env:
            return default
        raw = self.text(name)
        try:
            return parse(raw)
        except ValueError as error:
            raise SettingsError(f"{name}: {error}") from None

    def integer(self, name: str, *, minimum: int, default: int | None = None) -> int:
        def parse(raw: str) -> int:
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"must be an integer, got {raw!r}") from None
            if value < minimum:
                raise ValueError(f"must be >= {minimum}, got {value}")
            return value

        return self.parsed(name, parse, default)

    def seconds(self, name: str, default: timedelta) -> timedelta:
        def parse(raw: str) -> timedelta:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"must be a number of seconds, got {raw!r}") from None
            if value < 0:
                raise ValueError(f"must not be negative, got {raw!r}")
            return timedelta(seconds=value)

        return self.parsed(name, parse, default)

    def flag(self, name: str, default: bool) -> bool:
        def parse(raw: str) -> bool:
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(f"must be true or false, got {raw!r}")

        return self.parsed(name, parse, default)

    def choice(self, name: str, options: type[E], default: E) -> E:
        def parse(raw: str) -> E:
            try:
                return options(raw)
            except ValueError:
                allowed = [o.value for o in options]
                raise ValueError(f"must be one of {allowed}, got {raw!r}") from None

        return self.parsed(name, parse, default)

    def items(self, name: str) -> list[str]:
        """A comma-separated list of at least one item."""

        def parse(raw: str) -> list[str]:
            parts = [part.strip() for part in raw.split(",") if part.strip()]
            if not parts:
                raise ValueError("must list at least one item")
            return parts

        return self.parsed(name, parse)

    def mapping(self, name: str) -> dict[str, str]:
        """A JSON object of strings, not empty."""

        def parse(raw: str) -> dict[str, str]:
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ValueError(f"is not JSON: {error}") from None
            if not isinstance(value, dict) or not value:
                raise ValueError("must be a non-empty JSON object")
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise ValueError("must map strings to strings")
            return value

        return self.parsed(name, parse)
