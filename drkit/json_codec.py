"""JSON for the large documents: orjson, with the standard library's answers kept.

A failover at 10,000 groups x 50 partitions stores, reads back and prints 500,000 moves, and
reads 500,000 checkpoint headers; the standard ``json`` module spends seconds on each of those.
These functions give what ``json`` gives (same values, same refusals) several times faster:
anything orjson handles differently - integers beyond 64 bits, NaN written by ``json``, objects
it would serialize on its own (dataclasses, datetimes) - goes through ``json`` instead.

One difference, on purpose: a float that is NaN or infinite is written as ``null`` (unknown),
where ``json`` writes ``NaN``/``Infinity`` - not JSON, and refused by PostgreSQL's JSON type.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Dataclasses and datetimes go to ``default`` (json's ``str``), not orjson's own forms.
_AS_JSON = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)


def dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``: compact, refusing what it refuses."""
    try:
        return orjson.dumps(value, option=_AS_JSON).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"))


def dumps_sorted(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, default=str)`` on one compact line."""
    try:
        return orjson.dumps(value, default=str, option=_AS_JSON | orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


# 19 digits in a row: where integers beyond 64 bits begin (below -2**63, above 2**64 - 1).
# orjson reads those as floats without an error, so a document with such a run (in a number or
# a string: it cannot tell) is read by ``json``.  Offsets and epoch milliseconds have fewer.
# Found by translating every digit to "0" and searching for nineteen of them: both run in C at
# memory speed (a regular expression took 20 ms per MB).
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def _has_long_digits(text: str | bytes) -> bool:
    raw = text.encode() if isinstance(text, str) else text
    return raw.translate(_DIGITS_TO_ZERO).find(_LONG_RUN) >= 0


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, also for documents with NaN or Infinity that ``json`` wrote."""
    if _has_long_digits(text):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
