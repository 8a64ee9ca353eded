"""The provenance header every replicated record carries.

``drkit-src``    = ``<cluster>/<topic>/<partition>/<offset>`` of the record it was copied from
                   (replaced at every hop): the data-borne truth offset translation falls back on.
``drkit-origin`` = the Kafka cluster id of the cluster the record was first written to (kept
                   across hops): loop prevention for active-active flows.  Cluster ids, not
                   aliases, so deployments that name the same clusters differently still agree.

Both are ASCII so that Spark and ``kafka-console-consumer`` can read them.  Topic names and
cluster aliases cannot contain ``/``, so the encoding is unambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_HEADER = "drkit-src"
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
        """Parse a ``drkit-src`` value; raises ValueError on anything malformed."""
        cluster, topic, partition, offset = raw.decode("ascii").split("/")
        return cls(cluster, topic, int(partition), int(offset))


def source_prefix(cluster: str, topic: str, partition: int) -> bytes:
    """The constant part of ``drkit-src`` for one source partition (hot-path helper)."""
    return f"{cluster}/{topic}/{partition}/".encode()
