"""drkit.json_codec answers as the standard ``json`` module does, only faster."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit import json_codec
from drkit.records import TopicPartition

_finite = st.floats(allow_nan=False, allow_infinity=False)
_scalars = st.none() | st.booleans() | st.integers() | _finite | st.text()
_documents = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_documents)
def test_what_is_written_reads_back_as_json_would_read_json_s_own_text(document: object) -> None:
    expected = json.loads(json.dumps(document))
    assert json_codec.loads(json_codec.dumps(document)) == expected
    assert json_codec.loads(json.dumps(document)) == expected
    assert json.loads(json_codec.dumps_sorted(document)) == expected


def test_integers_beyond_64_bits_read_back_exactly() -> None:
    # orjson reads them as floats, without an error (found by the property above in CI).
    for value in (-(2**63) - 1, 2**64, -(2**70), 2**70):
        assert json_codec.loads(json.dumps({"offset": value})) == {"offset": value}
        assert json_codec.loads(json.dumps([value]).encode()) == [value]


def test_integers_beyond_64_bits_and_nan_go_through_json() -> None:
    huge = {"offset": 2**70}
    assert json.loads(json_codec.dumps(huge)) == huge
    back = json_codec.loads(json.dumps({"seconds": float("nan")}))
    assert math.isnan(back["seconds"])


def test_a_float_that_is_not_a_number_is_written_as_unknown_which_postgresql_accepts() -> None:
    assert json_codec.loads(json_codec.dumps({"a": float("nan"), "b": float("inf")})) == {
        "a": None,
        "b": None,
    }


def test_printing_keeps_json_s_str_for_values_it_cannot_encode() -> None:
    at = datetime(2026, 11, 28, 20, 0, tzinfo=UTC)
    value = {"b": TopicPartition("orders", 3), "a": at, "c": (1, 2)}
    printed = json_codec.dumps_sorted(value)
    assert json.loads(printed) == json.loads(json.dumps(value, sort_keys=True, default=str))
    assert printed.index('"a"') < printed.index('"b"') < printed.index('"c"')


def test_the_store_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        json_codec.dumps({"partition": TopicPartition("orders", 3)})
    with pytest.raises(ValueError):
        json_codec.loads("{not json")
