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


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, also for documents with NaN or Infinity that ``json`` wrote."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
