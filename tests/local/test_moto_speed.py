"""moto's update-expression machinery, and the workaround that makes it cheap.

The first tests pin the moto code ``vigil_tools.emulator.moto_speed`` relies on (it replaces one
of moto's functions line for line, and skips work whose answer depends only on what it caches
by): they fail the day a moto upgrade changes it; then re-read that code and adapt the module
(or drop it, if moto got fast). The others check that DynamoDB answers and writes the same with
and without it, the second time (from the caches) as the first.
"""

from __future__ import annotations

import hashlib
import inspect
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.helpers.tables import create_pk_sk_table
from vigil_tools.emulator import moto_memory, moto_speed

TABLE = "speed"

PINNED = {
    "traverse_node_recursively": "d7f01d9b45cf9f64",
    "nodes_to_be_processed": "1c2c84c8097e3517",
    "Validator.__init__": "9489b532dd0fb359",
    "Validator.validate": "5a99f0d36c7b7b8e",
    "get_ast_processors": "918400bbecd67e83",
    "ActionCountValidator": "3fe995f04a9c4a2d",
    "OverlappingPathsValidator": "27f48a77a1762303",
    "UpdateHashRangeKeyValidator": "18ca06e4b0d82e64",
    "make": "2c00ed96d6e191f2",
    "_lex_condition_expression": "a815288359216b2e",
    "_lex_one_node": "58485dd15b2f6df5",
}
"""The first 16 hex digits of the sha256 of each piece's source in moto 5.2.1."""


@pytest.fixture
def as_is() -> Iterator[None]:
    was = moto_speed.installed()
    moto_speed.uninstall()
    yield
    if was:
        moto_speed.install()


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(moto_memory.AS_IS, raising=False)
    was = moto_speed.installed()
    assert moto_speed.install()
    yield
    if not was:
        moto_speed.uninstall()


def _sources() -> dict[str, Callable[..., Any] | type]:
    ConditionExpressionParser, validators, DepthFirstTraverser, UpdateExpressionParser = (
        moto_speed._moto()
    )
    return {
        "traverse_node_recursively": DepthFirstTraverser.traverse_node_recursively,
        "nodes_to_be_processed": DepthFirstTraverser.nodes_to_be_processed,
        "Validator.__init__": validators.Validator.__init__,
        "Validator.validate": validators.Validator.validate,
        "get_ast_processors": validators.UpdateExpressionValidator.get_ast_processors,
        "ActionCountValidator": validators.ActionCountValidator,
        "OverlappingPathsValidator": validators.OverlappingPathsValidator,
        "UpdateHashRangeKeyValidator": validators.UpdateHashRangeKeyValidator,
        "make": UpdateExpressionParser.make,
        "_lex_condition_expression": ConditionExpressionParser._lex_condition_expression,
        "_lex_one_node": ConditionExpressionParser._lex_one_node,
    }


# --- what the workaround relies on in moto ------------------------------------------------------


def test_the_moto_code_the_workaround_copies_or_skips_is_unchanged(as_is: None) -> None:
    changed = {
        name: digest
        for name, source in _sources().items()
        if (digest := hashlib.sha256(inspect.getsource(source).encode()).hexdigest()[:16])
        != PINNED[name]
    }
    assert changed == {}, "moto changed: re-read it and adapt vigil_tools/emulator/moto_speed.py"


def test_moto_still_deep_copies_the_tree_it_validates_through_the_modules_deepcopy(
    as_is: None,
) -> None:
    import copy

    validators = moto_speed._module("validators")
    assert validators.deepcopy is copy.deepcopy
    assert "self.node_to_validate = deepcopy(expression)" in inspect.getsource(
        validators.Validator.__init__
    )


def test_the_pure_checks_come_first_and_no_processor_changes_the_walk(as_is: None) -> None:
    ast_nodes, validators = moto_speed._module("ast_nodes"), moto_speed._module("validators")
    source = inspect.getsource(validators.UpdateExpressionValidator.get_ast_processors)
    order = sorted(
        (source.index(f"{cls.__name__}("), cls.__name__)
        for cls in ast_nodes.DepthFirstTraverser.__subclasses__()
    )
    assert tuple(name for _, name in order[:3]) == moto_speed.PURE_CHECKS
    for cls in ast_nodes.DepthFirstTraverser.__subclasses__():
        for method in ("traverse_node_recursively", "nodes_to_be_processed", "traverse"):
            assert method not in cls.__dict__, (cls, method)


def test_no_node_class_is_registered_virtually(as_is: None) -> None:
    import abc

    ast_nodes = moto_speed._module("ast_nodes")

    def every(cls: type) -> Iterator[type]:
        yield cls
        sub: type
        for sub in cls.__subclasses__():
            yield from every(sub)

    for cls in every(ast_nodes.Node):
        registry = abc._get_dump(cls)[0]  # type: ignore[attr-defined]
        assert not registry, cls
        assert "__subclasshook__" not in cls.__dict__, cls


def test_neither_caller_changes_the_parsed_tree(fast: None, dynamodb: Any) -> None:
    UpdateExpressionParser = moto_speed._moto()[3]
    create_pk_sk_table(dynamodb, TABLE)
    expression = "SET #n = if_not_exists(#n, :zero) + :one, v = :v REMOVE gone"
    tree = UpdateExpressionParser.make(expression)
    before = pickle.dumps(tree)
    for _ in range(2):
        dynamodb.update_item(**_update("a", expression))
        dynamodb.transact_write_items(TransactItems=[{"Update": _update("b", expression)}])
    assert UpdateExpressionParser.make(expression) is tree
    assert pickle.dumps(tree) == before


# --- the same answers and writes, with and without ----------------------------------------------


def _update(sk: str, expression: str, **extra: Any) -> dict[str, Any]:
    used = expression + str(extra.get("ConditionExpression", ""))
    names = {"#n": "n"} if "#n" in used else {}
    values = {
        name: value
        for name, value in {
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":v": {"S": "x"},
            ":l": {"L": [{"S": "e"}]},
            ":s": {"SS": ["a", "b"]},
        }.items()
        if name in used
    }
    update: dict[str, Any] = {
        "TableName": TABLE,
        "Key": {"pk": {"S": "p"}, "sk": {"S": sk}},
        "UpdateExpression": expression,
        **extra,
    }
    if names:
        update["ExpressionAttributeNames"] = names
    if values:
        update["ExpressionAttributeValues"] = values
    return update


REQUESTS: list[dict[str, Any]] = [
    _update("a", "SET #n = if_not_exists(#n, :zero) + :one, v = :v"),
    _update("a", "SET #n = #n + :one", ConditionExpression="attribute_exists(v)"),
    _update("a", "SET #n = #n + :one", ConditionExpression="attribute_not_exists(v)"),
    _update("a", "SET l = list_append(if_not_exists(l, :l), :l) ADD s :s"),
    _update("a", "DELETE s :s REMOVE v"),
    _update("a", "SET v = :v", ConditionExpression="v = :v OR (size(l) > :one AND #n >= :zero)"),
    _update("b", "SET m.inner = :v"),  # no such map
    _update("a", "SET v = :v, v = :v"),  # two actions on one path
    _update("a", "SET pk = :v"),  # a key attribute
    _update("a", "SET #n = :one REMOVE #n"),
    _update("a", "SET v = :v SET w = :v"),  # two SET clauses
    _update("a", "SET #n = :missing"),
    _update("a", "ADD v :one"),  # ADD a number to a string
    _update("a", "SET v = :v", ConditionExpression="v = = :v"),  # a malformed condition
    _update("a", "SET v = :v,"),  # a malformed update
]


def _answers() -> list[Any]:
    answers: list[Any] = []
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_pk_sk_table(client, TABLE)
        for _ in range(2):  # the second round hits every cache
            for request in REQUESTS:
                calls: tuple[Callable[[dict[str, Any]], Any], ...] = (
                    lambda r: client.update_item(**r, ReturnValues="ALL_NEW"),
                    lambda r: client.transact_write_items(TransactItems=[{"Update": r}]),
                )
                for call in calls:
                    try:
                        answer = call(request)
                        answer.pop("ResponseMetadata", None)
                        answers.append(answer)
                    except ClientError as error:
                        answers.append(error.response["Error"])
                    except Exception as error:  # moto raises some refusals as they are
                        answers.append((type(error).__name__, str(error)))
            answers.append(client.scan(TableName=TABLE)["Items"])
    return answers


def test_dynamodb_answers_and_writes_the_same_with_the_workaround(monkeypatch: Any) -> None:
    monkeypatch.delenv(moto_memory.AS_IS, raising=False)
    was = moto_speed.installed()
    moto_speed.uninstall()
    try:
        slow = _answers()
        assert moto_speed.install()
        quick = _answers()
    finally:
        if not was:
            moto_speed.uninstall()
    assert quick == slow
    refused = {a["Code"] for a in slow if isinstance(a, dict) and "Code" in a}
    assert {"ValidationException", "ConditionalCheckFailedException"} <= refused
    assert "TransactionCanceledException" in refused


def test_the_caches_start_again_past_their_bound(fast: None, monkeypatch: Any) -> None:
    UpdateExpressionParser = moto_speed._moto()[3]
    monkeypatch.setattr(moto_speed, "CACHED_EXPRESSIONS", 3)
    for n in range(7):
        UpdateExpressionParser.make(f"SET v{n} = :v")
    assert 0 < len(moto_speed._parsed) <= 3
    assert len(moto_speed._pickled) == len(moto_speed._parsed)


def test_as_is_leaves_moto_alone(monkeypatch: pytest.MonkeyPatch, as_is: None) -> None:
    monkeypatch.setenv(moto_memory.AS_IS, "1")
    assert moto_speed.install() is False
    assert not moto_speed.installed()
