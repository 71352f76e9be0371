"""A narrow workaround that makes moto's (5.2.1) response serializer cheap for plain-dict results.

moto 5.2 serializes every response by walking the operation's output shape and asking, for each
member of each structure, an ``AttributePicker`` where the value is: it builds a context object,
instantiates six alias providers and asks each whether the member has another name (the shape's
name, a prefix-stripped name, the serialization name, each again in snake_case), then tries the
names in turn. A DynamoDB item's every attribute is an ``AttributeValue`` structure of ten members
(``S``, ``N``, ``M``, ...), nine of them absent: a profile of the pooled soak
(``benchmarks/pooled_soak.py``) put 25 of its 37 s of moto in that walk, 270 pickings a request.

For a result that is a plain ``dict`` (DynamoDB's and its streams' results are: ``dynamo_to_dict``)
the names to try depend on nothing but the member's shape, its parent structure and its key: the
providers that look at the object ask for its ``Meta`` (a dict has none) and its class's name
(``dict``). :func:`install` asks the providers once per (shape, parent, key) and remembers the
names; each picking is then a few dictionary lookups, tried in moto's order. Anything else (an
object, a dict subclass, a name with a dot that moto reads as a path, a picker with other
providers) goes through moto's own picker, and every response transformer is still applied.

``tests/local/test_moto_responses.py`` checks that responses come out byte for byte the same with
and without, and pins the moto code this relies on. ``VIGIL_MOTO_AS_IS=1`` leaves moto as it is.
"""

from __future__ import annotations

import os
from typing import Any

from vigil_tools.emulator.moto_memory import AS_IS

CACHED_MEMBERS = 65536
"""(shape, parent, key) triples kept; past that the cache starts again (a leak guard: botocore
caches its shapes per service model, and moto keeps one service model per service)."""

_original: dict[str, Any] = {}
_plain_pickers: dict[type, Any] = {}
"""moto's picker classes -> the providers list they use unless given another (set by install)."""
_names: dict[tuple[int, int, str], tuple[Any, Any, tuple[str, ...] | None]] = {}
"""(id(shape), id(parent), key) -> (shape, parent, the names to try, or None: moto's own picker).
The entry holds the shape and the parent, so their ids are not reused while it is here."""


def install() -> bool:
    """Apply it (once; idempotent). False when ``VIGIL_MOTO_AS_IS`` says not to."""
    if os.environ.get(AS_IS, "") not in ("", "0"):
        return False
    if _original:
        return True
    from moto.core.serialize import (
        DEFAULT_ALIAS_PROVIDERS,
        AttributePicker,
        ResponseSerializer,
        XFormedAttributePicker,
    )

    _plain_pickers.update(
        {AttributePicker: DEFAULT_ALIAS_PROVIDERS, XFormedAttributePicker: DEFAULT_ALIAS_PROVIDERS}
    )
    _original["get_value"] = ResponseSerializer.get_value
    ResponseSerializer.get_value = _get_value  # type: ignore[method-assign,assignment]
    return True


def uninstall() -> None:
    """Put moto back as it was (tests of this module)."""
    if not _original:
        return
    from moto.core.serialize import ResponseSerializer

    ResponseSerializer.get_value = _original.pop("get_value")  # type: ignore[method-assign]
    _names.clear()
    _plain_pickers.clear()


def installed() -> bool:
    return bool(_original)


def _get_value(serializer: Any, value: Any, key: str, shape: Any) -> Any:
    """``ResponseSerializer.get_value``: for a plain dict, the remembered names in moto's order."""
    picker = serializer._value_picker
    if type(value) is not dict or not _plain_picker(picker):
        return _original["get_value"](serializer, value, key, shape)
    parent = getattr(shape, "parent", None)
    entry = _names.get((id(shape), id(parent), key))
    if entry is None or entry[0] is not shape or entry[1] is not parent:
        entry = (shape, parent, _possible_names(serializer, picker, value, key, shape))
        if len(_names) >= CACHED_MEMBERS:
            _names.clear()
        _names[(id(shape), id(parent), key)] = entry
    names = entry[2]
    if names is None:
        return _original["get_value"](serializer, value, key, shape)
    for name in names:
        if name in value:
            found = value[name]
            break
    else:
        found = None
    transformers = picker.response_transformers
    if transformers:
        key_path = f"{'.'.join(serializer.path)}.{key}"
        for path, transform in transformers.items():
            if key_path.endswith(path):
                return transform(found)
    return found


def _plain_picker(picker: Any) -> bool:
    """moto's own picker classes with moto's own providers (another's names may differ)."""
    return _plain_pickers.get(type(picker), _plain_pickers) is picker.alias_providers


def _possible_names(
    serializer: Any, picker: Any, value: dict[str, Any], key: str, shape: Any
) -> tuple[str, ...] | None:
    """The names moto's picker tries for this member of a dict, or None if one is a dotted path."""
    from moto.core.serialize import AttributePickerContext

    context = AttributePickerContext(
        obj=value,
        key=key,
        shape=shape,
        operation_model=serializer.operation_model,
        service_model=serializer.operation_model.service_model,
        key_path=".".join(serializer.path),
    )
    names = tuple(picker.get_possible_keys(context))
    return None if any("." in name for name in names) else names
