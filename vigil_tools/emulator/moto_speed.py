"""Narrow workarounds that make moto's (5.2.1) DynamoDB update expressions cheap to evaluate.

Every ``UpdateItem`` and every ``Update`` of a ``TransactWriteItems`` costs moto far more than the
write: a profile of the chaos soak (``benchmarks/chaos_soak.py``, 300 ticks) put three quarters
of its time after the synth in moto's update-expression machinery, for three reasons:

* **Parsed twice, afresh, per write.** ``UpdateExpressionParser.make`` tokenizes and parses the
  expression string in the request handler (to find the names it uses) and again in the backend.
  The tree depends on the string alone, and neither caller changes it (the backend's validator
  deep-copies it first), so :func:`install` parses each distinct string once and hands back the
  same tree.
* **Deep-copied per validation.** ``Validator.__init__`` deep-copies the tree (its processors
  rewrite the copy in place). For a tree :func:`install` cached, the copy is unpickled from the
  bytes pickled when it was parsed (about six times faster than ``copy.deepcopy``; the same
  objects, the same parent links); anything else is deep-copied as before.
* **Walked ten times with abstract-class checks.** The validator runs ten processors, each a
  ``DepthFirstTraverser`` walk of the whole tree asking ``isinstance(node, Node)`` and
  ``isinstance(node, self.nodes_to_be_processed())`` of every node: ``Node`` is an ``abc.ABCMeta``
  class, so each check goes through ``ABCMeta.__instancecheck__``, and ``nodes_to_be_processed``
  rebuilds its tuple from a fresh dict each time (millions of calls per thousand writes).
  :func:`install` replaces ``traverse_node_recursively`` with the same walk whose two answers are
  remembered per (processor class, node class): they depend on nothing else, because each
  processor's ``_processing_map`` has fixed keys and no node class is registered virtually.

* **Checked again per write.** Three of the ten processors (``ActionCountValidator``,
  ``OverlappingPathsValidator``, ``UpdateHashRangeKeyValidator``) only check the tree against the
  expression's names and the table's key attributes, raising or leaving it as it is; the first
  two look for clauses below every ``UpdateExpression`` node, and the tree nests one per action,
  so they cost the square of the expression's length. Their answer depends on (expression,
  names, key attributes) alone: :func:`install` runs them the first time a triple is seen and,
  once they passed, skips them for it (a triple they refused is checked, and refused, each time).

* **Condition expressions lexed afresh.** ``ConditionExpressionParser`` (every
  ``ConditionExpression``, parsed twice per write too) lexes the string token by token, compiling
  seven regular expressions per token. The tokens depend on the string alone: :func:`install`
  lexes each distinct string once and hands each parse fresh tokens (new tuples, new empty child
  lists) equal to moto's; the parse that follows (which puts the values in) is moto's own.

The write itself, the condition checks, every validation and every error are moto's own, in the
same order: only repeated work is skipped. ``tests/local/test_moto_speed.py`` checks that writes
and refusals come out the same with and without, and pins the moto code this relies on: it fails
the day a moto upgrade changes it (then re-read moto's code and adapt this module, or drop it).
``VIGIL_MOTO_AS_IS=1`` leaves moto as it is, as for :mod:`~vigil_tools.emulator.moto_memory`.
"""

from __future__ import annotations

import copy
import importlib
import os
import pickle
from collections import deque
from typing import Any

from vigil_tools.emulator.moto_memory import AS_IS

CACHED_EXPRESSIONS = 4096
"""Distinct update expressions kept parsed; past that the cache starts again (a leak guard: an
application builds its expressions from a handful of templates)."""

_originals: dict[str, Any] = {}
_parsed: dict[str, Any] = {}
"""Expression string -> its parsed tree (shared, never changed: see the module's docstring)."""
_pickled: dict[int, tuple[Any, bytes, str]] = {}
"""id(a parsed tree) -> (the tree, pickled before anyone saw it, its expression string). The
entry holds the tree, so its id is not reused while the entry is here; the tree is checked too."""
_checked: set[tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]] = set()
"""(expression, names, table key attributes) the pure checks passed."""
PURE_CHECKS = ("ActionCountValidator", "OverlappingPathsValidator", "UpdateHashRangeKeyValidator")
"""The processors that only check (by class name: the tests pin that they come first)."""
_lexed: dict[str, tuple[Any, ...]] = {}
"""Condition expression string -> its tokens (moto's ``ConditionExpressionParser.Node``)."""
_is_node: dict[type, bool] = {}
_processes: dict[tuple[type, type], bool] = {}


def install() -> bool:
    """Apply the three (once; idempotent). False when ``VIGIL_MOTO_AS_IS`` says not to."""
    if os.environ.get(AS_IS, "") not in ("", "0"):
        return False
    if _originals:
        return True
    ConditionExpressionParser, validators, DepthFirstTraverser, UpdateExpressionParser = _moto()

    _originals["make"] = UpdateExpressionParser.__dict__["make"]
    _originals["deepcopy"] = validators.deepcopy
    _originals["traverse"] = DepthFirstTraverser.traverse_node_recursively
    _originals["lex"] = ConditionExpressionParser._lex_condition_expression
    _originals["init"] = validators.UpdateExpressionValidator.__init__
    _originals["validate"] = validators.UpdateExpressionValidator.__dict__.get("validate")
    UpdateExpressionParser.make = classmethod(_make)  # type: ignore[method-assign,assignment]
    validators.deepcopy = _deepcopy  # type: ignore[attr-defined]
    DepthFirstTraverser.traverse_node_recursively = _traverse_node_recursively  # type: ignore[method-assign]
    validators.UpdateExpressionValidator.__init__ = _validator_init  # type: ignore[method-assign]
    validators.UpdateExpressionValidator.validate = _validate  # type: ignore[method-assign]
    ConditionExpressionParser._lex_condition_expression = _lex  # type: ignore[method-assign,assignment]
    return True


def uninstall() -> None:
    """Put moto back as it was (tests of this module)."""
    if not _originals:
        return
    ConditionExpressionParser, validators, DepthFirstTraverser, UpdateExpressionParser = _moto()

    UpdateExpressionParser.make = _originals.pop("make")  # type: ignore[method-assign]
    validators.deepcopy = _originals.pop("deepcopy")  # type: ignore[attr-defined]
    DepthFirstTraverser.traverse_node_recursively = _originals.pop("traverse")  # type: ignore[method-assign]
    validators.UpdateExpressionValidator.__init__ = _originals.pop("init")  # type: ignore[method-assign]
    ConditionExpressionParser._lex_condition_expression = _originals.pop("lex")  # type: ignore[method-assign]
    validate = _originals.pop("validate")
    if validate is None:
        del validators.UpdateExpressionValidator.validate
    else:
        validators.UpdateExpressionValidator.validate = validate  # type: ignore[method-assign]
    _forget()


def installed() -> bool:
    return bool(_originals)


def _module(name: str) -> Any:
    """One of moto's DynamoDB parsing modules (untyped: moto marks them ``type: ignore``)."""
    return importlib.import_module(f"moto.dynamodb.parsing.{name}")


def _moto() -> tuple[Any, Any, Any, Any]:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    return (
        ConditionExpressionParser,
        _module("validators"),
        _module("ast_nodes").DepthFirstTraverser,
        _module("expressions").UpdateExpressionParser,
    )


def _make(cls: type, expression_str: str) -> Any:
    """``UpdateExpressionParser.make``, once per distinct string (a refused one is parsed again
    each time, so it raises each time as before)."""
    make = _originals["make"].__func__
    if cls is not _moto()[3] or not isinstance(expression_str, str):
        return make(cls, expression_str)
    tree = _parsed.get(expression_str)
    if tree is None:
        tree = make(cls, expression_str)
        if len(_parsed) >= CACHED_EXPRESSIONS:
            _forget()
        frozen = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
        _pickled[id(tree)] = (tree, frozen, expression_str)
        _parsed[expression_str] = tree
    return tree


def _forget() -> None:
    _parsed.clear()
    _pickled.clear()
    _checked.clear()
    _lexed.clear()


def _deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy`` as the validators module sees it: a cached tree is unpickled."""
    entry = _pickled.get(id(value))
    if entry is not None and entry[0] is value and memo is None:
        return pickle.loads(entry[1])  # bytes this process pickled itself
    return copy.deepcopy(value, memo)


def _traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
    """moto's ``DepthFirstTraverser.traverse_node_recursively``, line for line, with its two
    ``isinstance`` answers remembered per class (see the module's docstring)."""
    kind = type(node)
    is_node = _is_node.get(kind)
    if is_node is None:
        is_node = _is_node[kind] = isinstance(node, _module("ast_nodes").Node)
    if is_node:
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        key = (type(self), kind)
        processes = _processes.get(key)
        if processes is None:
            processes = _processes[key] = isinstance(node, self.nodes_to_be_processed())
        if processes:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
    return node


def _validator_init(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
    """``UpdateExpressionValidator.__init__``, noting which cached expression it validates."""
    _originals["init"](self, expression, *args, **kwargs)
    entry = _pickled.get(id(expression))
    self.vigil_source = entry[2] if entry is not None and entry[0] is expression else None


def _validate(self: Any) -> Any:
    """moto's ``Validator.validate`` (each processor in turn), skipping the pure checks for an
    (expression, names, key attributes) they passed before."""
    key = None
    if getattr(self, "vigil_source", None) is not None:
        names = self.expression_attribute_names or {}
        key = (
            self.vigil_source,
            tuple(sorted(names.items())),
            tuple(self.table.table_key_attrs),
        )
    passed = key is not None and key in _checked
    n = self.node_to_validate
    for processor in self.processors:
        pure = type(processor).__name__ in PURE_CHECKS
        if pure and passed:
            continue
        if not pure and key is not None and not passed:
            _checked.add(key)  # the pure checks come first: all of them passed
            passed = True
        n = processor.traverse(n)
    return n


def _lex(self: Any) -> deque[Any]:
    """``ConditionExpressionParser._lex_condition_expression``, once per distinct string."""
    expression = self.condition_expression
    tokens = _lexed.get(expression)
    if tokens is None:
        tokens = tuple(_originals["lex"](self))
        if len(_lexed) >= CACHED_EXPRESSIONS:
            _lexed.clear()
        _lexed[expression] = tokens
    return deque(token._replace(children=[]) for token in tokens)
