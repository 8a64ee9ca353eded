"""The provenance header every replicated record carries.

``drkit-src``    = ``<cluster>/<topic>/<partition>/<offset>`` of the record it was copied from
                   (replaced at every hop): the data-borne truth offset translation falls back on.
``drkit-origin`` = ``<origin id>/<written-to cluster id>/<written-to topic>``: the Kafka cluster
                   id of the cluster the record was first written to (kept across hops), then
                   where drkit wrote *this copy* (rewritten at every hop).  Loop prevention for
                   active-active flows.  Cluster ids, not aliases, so deployments that name the
                   same clusters differently still agree.

Loops versus forwarded headers.  An application that reads a replica and writes new records
with the input headers copied (Kafka Streams does so by default) produces records that carry
another cluster's origin.  They are new data and must be replicated.  A record is a *true loop*
only when it is a drkit copy sitting exactly where drkit wrote it (same cluster, same topic) and
its origin is the flow's target.  A record that carries a copied header elsewhere is native to
the cluster it is on: its origin becomes that cluster.  Legacy values (a bare cluster id, written
before the location was recorded) count as drkit copies when the record's ``drkit-src`` names
the topic it sits in (identity-named replicas), else as forwarded.

Both are ASCII so that Spark and ``kafka-console-consumer`` can read them.  Topic names and
cluster aliases cannot contain ``/``, so the encoding is unambiguous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SOURCE_HEADER = "drkit-src"
_INTEGER = re.compile(r"-?[0-9]+")
ORIGIN_HEADER = "drkit-origin"


@dataclass(frozen=True)
class Provenance:
    cluster: str
    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.cluster}/{self.topic}/{self.partition}/{self.offset}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> Provenance:
        """Parse a ``drkit-src`` value; raises ValueError on anything malformed (partition and
        offset are plain decimal integers)."""
        cluster, topic, partition, offset = raw.decode("ascii").split("/")
        if not (_INTEGER.fullmatch(partition) and _INTEGER.fullmatch(offset)):
            raise ValueError(f"malformed {SOURCE_HEADER} value {raw!r}")
        return cls(cluster, topic, int(partition), int(offset))


@dataclass(frozen=True)
class Origin:
    """A decoded ``drkit-origin`` value; ``written_to`` is None for legacy values."""

    cluster_id: str
    written_to: tuple[str, str] | None  # (cluster id, topic) where drkit wrote this copy

    def encode(self) -> bytes:
        if self.written_to is None:
            return self.cluster_id.encode()
        return f"{self.cluster_id}/{self.written_to[0]}/{self.written_to[1]}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> Origin:
        """Parse a ``drkit-origin`` value; raises ValueError on anything malformed."""
        parts = raw.decode("ascii").split("/")
        if len(parts) == 1 and parts[0]:
            return cls(parts[0], None)
        if len(parts) == 3 and all(parts):
            return cls(parts[0], (parts[1], parts[2]))
        raise ValueError(f"malformed {ORIGIN_HEADER} value {raw!r}")

    def is_copy_at(self, cluster_id: str, topic: str, src: bytes | None = None) -> bool:
        """Whether this is a drkit copy sitting where drkit wrote it.

        Legacy values carry no location: they count as copies unless the record's
        ``drkit-src`` (``src``) names another topic than the one it sits in.
        """
        if self.written_to is not None:
            return self.written_to == (cluster_id, topic)
        if src is None:
            return True
        try:
            return Provenance.decode(src).topic == topic
        except (ValueError, UnicodeDecodeError):
            return True


def origin_of_record(
    raw: bytes | None, cluster_id: str, topic: str, src: bytes | None = None
) -> str:
    """The origin cluster id of a record read from ``topic`` on cluster ``cluster_id``.

    ``raw`` is its ``drkit-origin`` value and ``src`` its ``drkit-src`` value (if any).  A drkit
    copy in place keeps its recorded origin; anything else (no header, a header copied by an
    application into another topic, an unreadable value) originates here.
    """
    if raw is None:
        return cluster_id
    try:
        origin = Origin.decode(raw)
    except (ValueError, UnicodeDecodeError):
        return cluster_id
    return origin.cluster_id if origin.is_copy_at(cluster_id, topic, src) else cluster_id


def is_loop(
    raw: bytes | None,
    cluster_id: str,
    topic: str,
    target_cluster_id: str,
    src: bytes | None = None,
) -> bool:
    """Whether replicating this record to ``target_cluster_id`` would send it back home."""
    return origin_of_record(raw, cluster_id, topic, src) == target_cluster_id


def origin_header(origin_id: bytes, target_cluster_id: bytes, target_topic: str) -> bytes:
    """The ``drkit-origin`` value for a copy written to ``target_topic`` on the target."""
    return origin_id + b"/" + target_cluster_id + b"/" + target_topic.encode()


def source_prefix(cluster: str, topic: str, partition: int) -> bytes:
    """The constant part of ``drkit-src`` for one source partition (hot-path helper)."""
    return f"{cluster}/{topic}/{partition}/".encode()
