"""Where an adopted flow's MirrorMaker 2 range is kept: ``drkit-adopted.<source>.internal``.

One compacted record per source partition, on the target (so a failover reads it with the
source gone), written once by ``drkit adopt`` before the flow's first drkit runs and progress:

key   = ``<target alias>/<source topic>/<source partition>`` (UTF-8, as progress keys)
value = JSON ``{"upstream": [...], "downstream": [...], "end": A, "end_target": B,
        "adopted_at_ms": ms, "from": "mirrormaker2"}``

``upstream``/``downstream`` are MM2's sync points below the adoption point (at most
:data:`MAX_POINTS`, the latest kept: rounding down further only adds re-reads), ``end`` the
first source offset drkit's runs map and ``end_target`` its copy's target offset
(drkit.translation.Mm2Syncs).

Every record carries a ``drkit-mac`` header (drkit/signing.py, kind ``adopted``, the flow's
key): below ``end`` an adopted range overrides the signed runs, so a reader with the flow's
key trusts only a record that verifies.  One that does not (a foreign writer's, or one written
before adopted ranges were signed) is ignored, counted and turned into a claim over
``[0, end)`` - the loader doubts it (drkit/translation.py, invariant 9): an ignored adoption
may have been real, so translation rounds down there, never skips.
"""

from __future__ import annotations

import json
import logging
import time

from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.records import Headers, TopicPartition
from drkit.replication.progress import progress_key
from drkit.signing import Signer
from drkit.translation import Mm2Syncs

log = logging.getLogger(__name__)

MAX_POINTS = 20_000  # ~0.5 MB of JSON: well inside a record's default size limit


def adopted_key(target_alias: str, source: TopicPartition) -> bytes:
    return progress_key(target_alias, source)


def adopted_value(syncs: Mm2Syncs, adopted_at_ms: int | None = None) -> bytes:
    """The record of one partition; only the latest :data:`MAX_POINTS` points are kept."""
    body = {
        "upstream": list(syncs.upstream[-MAX_POINTS:]),
        "downstream": list(syncs.downstream[-MAX_POINTS:]),
        "end": syncs.end,
        "end_target": syncs.end_target,
        "adopted_at_ms": adopted_at_ms or int(time.time() * 1000),
        "from": "mirrormaker2",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def adopted_partition(key: bytes) -> tuple[str, TopicPartition] | None:
    """(target alias, source partition) a record's key names; None for a malformed key."""
    try:
        target, topic, partition = key.decode().split("/")
        return target, TopicPartition(topic, int(partition))
    except (ValueError, UnicodeDecodeError):
        return None


def decode_adopted(key: bytes, value: bytes | None) -> tuple[str, TopicPartition, Mm2Syncs] | None:
    """(target alias, source partition, syncs); None for tombstones and malformed records."""
    if value is None:
        return None
    named = adopted_partition(key)
    if named is None:
        return None
    try:
        body = json.loads(value)
        syncs = Mm2Syncs(
            tuple(int(x) for x in body["upstream"]),
            tuple(int(x) for x in body["downstream"]),
            int(body["end"]),
            int(body["end_target"]),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return named[0], named[1], syncs


def _claimed_end(value: bytes | None) -> int:
    """The adoption point an unverified record claims (0 when it claims none it can show)."""
    try:
        return max(0, int(json.loads(value)["end"])) if value is not None else 0
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return 0


class AdoptedRanges:
    """The MirrorMaker 2 ranges of one flow's partitions, fed one record at a time (no I/O).

    With a ``signer`` (the flow's key, kind ``adopted``) only records that verify are ranges;
    the others are counted (``rejected``) and kept as claims over ``[0, end)`` per source
    partition (``claims``: the loader doubts them, invariant 9).  Records of other targets'
    flows on the same topic are neither."""

    def __init__(self, target_alias: str, signer: Signer | None = None) -> None:
        self.target_alias = target_alias
        self.signer = signer
        self.rejected = 0
        self.accepted = 0
        self.claims: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._latest: dict[TopicPartition, Mm2Syncs] = {}

    def receive(self, key: bytes, value: bytes | None, headers: Headers) -> bool:
        """One record as read; False when it is not a range (another flow's, malformed, or
        rejected - only the last is counted)."""
        named = adopted_partition(key)
        if named is None or named[0] != self.target_alias:
            return False
        if self.signer is not None and not self.signer.accepts(key, value, headers):
            self.rejected += 1
            self.claims.setdefault(named[1], []).append((0, _claimed_end(value)))
            return False
        if self.signer is not None:
            self.accepted += 1
        decoded = decode_adopted(key, value)
        if decoded is None:  # drkit writes no tombstones here; a malformed record is none
            return False
        self._latest[decoded[1]] = decoded[2]
        return True

    def latest(self) -> dict[TopicPartition, Mm2Syncs]:
        return dict(self._latest)


class AdoptedStore(AdoptedRanges):
    """:class:`AdoptedRanges` kept current from the target cluster's adopted topic.

    A flow that was never adopted has no such topic: that reads as no ranges."""

    def __init__(self, target: ClusterEndpoint, topic: str, *, signer: Signer | None) -> None:
        """``signer``: the flow's key of kind ``adopted`` (drkit/store/flow_keys.py); None
        only for readers that say they do not verify (bench, tests without a store)."""
        super().__init__(target.alias, signer)
        self.topic = topic
        self._tailer = TopicTailer(target, topic, missing_ok=True)

    def refresh(self, timeout_s: float = 30.0) -> dict[TopicPartition, Mm2Syncs]:
        before = self.rejected
        for record in self._tailer.catch_up(timeout_s):
            if record.key is not None:
                self.receive(record.key, record.value, record.headers)
        if self.rejected > before:
            log.warning(
                "ignored adopted-range records that failed verification (no valid drkit-mac: "
                "not written by this flow's drkit adopt, or written before they were signed); "
                "translation rounds down below their adoption point",
                extra={"topic": self.topic, "records": self.rejected - before},
            )
        return self.latest()

    def close(self) -> None:
        self._tailer.close()
