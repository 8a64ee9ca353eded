"""The pointer record clients follow: its format, its signature and the epoch rule (pure).

One record per pointer on the compacted topic ``drkit-pointer.internal`` (the default of
``failover.pointer_topic``, :data:`drkit.topology.internal_topics.POINTER_TOPIC`) of every
cluster that answered the failover engine: key = the pointer's name (``default``), value = a
compact JSON document::

    {"schema": "drkit.pointer.record/v1", "name": "default", "cluster": "dc2", "epoch": 4,
     "run_id": 17, "updated_at": "2026-12-06T10:40:01.123Z",
     "clusters": {"dc1": "h1:9092", "dc2": "h2:9092"}}

``epoch`` is the state store's pointer epoch: it grows by one with every move.  The rule every
reader keeps: the pointer is the valid record with the highest epoch seen on any cluster, and a
reader never goes back to a lower epoch (a cluster that was away holds an older record until
the monitor writes the newer one there).

Signed like the control channel (drkit/signing.py): the ``drkit-mac`` header holds the
HMAC-SHA256 of the key and value under the pointer key, kind ``pointer``; a record whose MAC is
missing or wrong is never the pointer.  The pointer key is its own 32 bytes (derived from
``signing.secret``, or kept in the state store), never a flow's key: an application holds it
and could sign pointers with it, but never offset syncs or directives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drkit.signing import MAC_HEADER, Kind, Signer

SCHEMA = "drkit.pointer.record/v1"
DEFAULT_NAME = "default"

# What a Kafka record's headers look like to the readers (confluent-kafka's shape).
Headers = Iterable[tuple[str, bytes | None]] | None


@dataclass(frozen=True)
class PointerRecord:
    """Where applications belong: ``cluster``, decided by the move that made ``epoch``.

    ``clusters``: every cluster's bootstrap servers as the engine's config names them - a
    client that knows only some clusters learns the others' addresses here."""

    name: str
    cluster: str
    epoch: int
    run_id: int | None
    updated_at: str  # ISO-8601 UTC (drkit.timestamps), as the store recorded the move
    clusters: Mapping[str, str] = field(default_factory=dict)

    def key(self) -> bytes:
        return self.name.encode()

    def document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "cluster": self.cluster,
            "epoch": self.epoch,
            "run_id": self.run_id,
            "updated_at": self.updated_at,
            "clusters": dict(sorted(self.clusters.items())),
        }

    def value(self) -> bytes:
        """The value as written (compact JSON, the same bytes the MAC covers)."""
        return json.dumps(self.document(), separators=(",", ":")).encode()

    def bootstrap(self, cluster: str | None = None) -> str | None:
        """``cluster``'s (default: the pointer's) bootstrap servers, as the record names them."""
        return self.clusters.get(cluster or self.cluster)


def decode(key: bytes | None, value: bytes | None) -> PointerRecord | None:
    """The record a (key, value) holds, or None when it is not a pointer record of this
    format (malformed, another schema, a tombstone, a key that is not its name)."""
    if key is None or value is None:
        return None
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    try:
        name, cluster, epoch = doc["name"], doc["cluster"], doc["epoch"]
        run_id, updated_at, clusters = doc.get("run_id"), doc.get("updated_at", ""), doc["clusters"]
    except KeyError:
        return None
    if (
        not isinstance(name, str)
        or name.encode() != key
        or not isinstance(cluster, str)
        or not cluster
        or type(epoch) is not int
        or epoch < 1
        or not (run_id is None or type(run_id) is int)
        or not isinstance(updated_at, str)
        or not isinstance(clusters, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in clusters.items())
    ):
        return None
    return PointerRecord(name, cluster, epoch, run_id, updated_at, dict(clusters))


class PointerSigner:
    """Signs and checks pointer records under one pointer key (32 bytes)."""

    def __init__(self, key: bytes, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self._signer = Signer(key, Kind.POINTER, name)

    def __repr__(self) -> str:
        return f"PointerSigner({self.name!r})"

    def header(self, key: bytes, value: bytes) -> tuple[str, bytes]:
        return self._signer.header(key, value)

    def headers(self, record: PointerRecord) -> list[tuple[str, bytes]]:
        """The headers to write ``record`` with."""
        return [self.header(record.key(), record.value())]

    def accepts(self, key: bytes | None, value: bytes | None, headers: Headers) -> bool:
        return self._signer.accepts(key, value, headers)

    def read(
        self, key: bytes | None, value: bytes | None, headers: Headers
    ) -> PointerRecord | None:
        """The pointer record a Kafka record holds when it is this pointer's, well formed and
        signed under this key; else None (the caller counts it as rejected)."""
        if key != self.name.encode() or not self.accepts(key, value, headers):
            return None
        return decode(key, value)


def newer(current: PointerRecord | None, seen: PointerRecord) -> bool:
    """The epoch rule: follow ``seen`` only when its epoch is above the current one's (an equal
    epoch is the same move, read again on another cluster; a lower one is an older move a
    cluster that was away still holds)."""
    return current is None or seen.epoch > current.epoch


def newest(records: Iterable[PointerRecord]) -> PointerRecord | None:
    """The pointer across every record read (every cluster): the highest epoch; of equal
    epochs the first read."""
    best: PointerRecord | None = None
    for record in records:
        if newer(best, record):
            best = record
    return best


__all__ = [
    "DEFAULT_NAME",
    "MAC_HEADER",
    "SCHEMA",
    "PointerRecord",
    "PointerSigner",
    "decode",
    "newer",
    "newest",
]
