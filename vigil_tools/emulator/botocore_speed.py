"""What each new botocore session and client rebuilds that cannot change within the process.

``mock_aws`` drops boto3's default session each time it starts, so each test builds a session and
its clients anew (:mod:`~vigil_tools.emulator.model_loader` already shares the decoded models). A
profile of a test's minimal life (start moto, make a DynamoDB client, one call: 47 CPU ms) put
over a third of it in three answers botocore works out again for each session or client, each
depending on nothing that differs between them:

* **Does a handler take ``**kwargs``?** A session registers ~130 built-in handlers, and botocore
  asks ``inspect.getfullargspec`` of each, every time. The answer depends on the function's code
  alone: :func:`install` asks once per plain function (a bound method: once per its function);
  any other callable is asked each time, as before.
* **An event name's alias.** Each session's ``EventAliaser`` starts an empty cache of event name
  to aliased name, filled again by the same registrations. With botocore's own alias table (every
  session's) the answer depends on the name alone: such aliasers share one cache.
* **A service's endpoint rules.** Each client parses its service's endpoint rule set into a
  ``RuleSet`` tree. With the shared loader the rule set is the same object each time, and the
  provider keeps nothing of a client's (its cache maps parameters to endpoints): clients of one
  rule set share one provider.

Together 47 to about 30 ms per test, ~1,000 tests. ``tests/local/test_botocore_speed.py`` checks
that each answer is the same with and without. ``VIGIL_MOTO_AS_IS=1`` leaves botocore as it is.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any

import botocore.hooks
import botocore.regions

from vigil_tools.emulator.moto_memory import AS_IS

CACHED_PROVIDERS = 256
"""Endpoint providers kept (a leak guard: without the shared loader each client's rule set is a
new object and never found again)."""

CACHED_HANDLERS = 1024
"""Handler functions whose answer is kept (a bound: a closure made per client would otherwise be
held, with what it closes over, for the life of the process)."""

_original: dict[str, Any] = {}
_aliases: dict[str, str] = {}
"""Event name -> its name under botocore's own alias table (every default ``EventAliaser``'s)."""
_providers: dict[tuple[int, int, Any], tuple[Any, Any, Any]] = {}
"""(id(rule set), id(partitions), excluded parameters) -> (rule set, partitions, provider): the
entry holds both dicts, so their ids are not reused while it is here."""


def install() -> bool:
    """Apply the three (once; idempotent). False when ``VIGIL_MOTO_AS_IS`` says not to."""
    if os.environ.get(AS_IS, "") not in ("", "0"):
        return False
    if _original:
        return True
    _original["accepts_kwargs"] = botocore.hooks.accepts_kwargs
    _original["aliaser_init"] = botocore.hooks.EventAliaser.__init__
    _original["provider"] = botocore.regions.EndpointProvider
    botocore.hooks.accepts_kwargs = _accepts_kwargs
    botocore.hooks.EventAliaser.__init__ = _aliaser_init  # type: ignore[method-assign]
    botocore.regions.EndpointProvider = _provider  # type: ignore[misc,assignment]
    return True


def uninstall() -> None:
    """Put botocore back as it was (tests of this module)."""
    if not _original:
        return
    botocore.hooks.accepts_kwargs = _original.pop("accepts_kwargs")
    botocore.hooks.EventAliaser.__init__ = _original.pop("aliaser_init")  # type: ignore[method-assign]
    botocore.regions.EndpointProvider = _original.pop("provider")
    _function_accepts_kwargs.cache_clear()
    _aliases.clear()
    _providers.clear()


def installed() -> bool:
    return bool(_original)


def _accepts_kwargs(handler: Any) -> str | None:
    """The name of the handler's ``**kwargs`` or None, as ``botocore.compat.accepts_kwargs``."""
    if isinstance(handler, types.MethodType) and isinstance(handler.__func__, types.FunctionType):
        return _function_accepts_kwargs(handler.__func__)
    if isinstance(handler, types.FunctionType):
        return _function_accepts_kwargs(handler)
    answer: str | None = _original["accepts_kwargs"](handler)
    return answer


@functools.lru_cache(maxsize=CACHED_HANDLERS)
def _function_accepts_kwargs(function: types.FunctionType) -> str | None:
    answer: str | None = _original["accepts_kwargs"](function)
    return answer


def _aliaser_init(aliaser: Any, event_emitter: Any, event_aliases: Any = None) -> None:
    _original["aliaser_init"](aliaser, event_emitter, event_aliases)
    if event_aliases is None:
        aliaser._alias_name_cache = _aliases


def _provider(ruleset_data: Any, partition_data: Any, excluded_params: Any = None) -> Any:
    key = (id(ruleset_data), id(partition_data), frozenset(excluded_params or ()))
    entry = _providers.get(key)
    if entry is None or entry[0] is not ruleset_data or entry[1] is not partition_data:
        provider = _original["provider"](ruleset_data, partition_data, excluded_params)
        if len(_providers) >= CACHED_PROVIDERS:
            _providers.clear()
        entry = _providers[key] = (ruleset_data, partition_data, provider)
    return entry[2]
