"""Forged offset syncs and flow directives are rejected (issue 46, item 7): record MACs
(drkit/signing.py), each flow's key in the store (drkit/store/flow_keys.py), the offset-sync
reader ignoring what fails them without making translation skip (drkit/translation.py,
invariant 9), and the control channel ignoring forged directives and acks."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from drkit.config import load_config_text
from drkit.config.model import FlowConfig
from drkit.control.gate import FlowGate
from drkit.control.model import DesiredState, FlowDirective
from drkit.errors import StateStoreError
from drkit.failover.model import Severity
from drkit.failover.plan import unverified_syncs_finding
from drkit.offsets.corroboration import Corroborator
from drkit.offsets.mapping_loader import doubt
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync, RunTracker
from drkit.replication.offset_sync_store import MALFORMED, RunMaps
from drkit.replication.run_map import RunTable
from drkit.signing import KEY_BYTES, MAC_HEADER, Kind, Signer, derive_key, mac_of, sign, verify
from drkit.store.db import StateStore
from drkit.store.flow_keys import FlowKeys, control_keys, create_key, key_for, keys_of
from drkit.store.models import FlowKey
from drkit.topology.internal_topics import control_topic, offset_syncs_topic
from drkit.translation import (
    Flag,
    Method,
    PartitionMapping,
    TargetBounds,
    Translated,
    translate,
    translate_back,
)
from tests.fake_kafka import FakeCluster, signed_channel
from tests.unit.test_claim_corroboration import loaded, target_log

FLOW = "dc1->dc2"
KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
SOURCE = TopicPartition("orders", 0)
TARGET = TopicPartition("dc1.orders", 0)
SYNCS = offset_syncs_topic("dc1")


# -- the MAC ----------------------------------------------------------------------------------


def test_a_mac_verifies_only_its_own_key_kind_flow_and_record() -> None:
    mac = sign(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v")
    assert len(mac) == 32
    assert verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v", mac)
    assert not verify(OTHER, Kind.OFFSET_SYNC, FLOW, b"k", b"v", mac)
    assert not verify(KEY, Kind.CONTROL, FLOW, b"k", b"v", mac)
    assert not verify(KEY, Kind.OFFSET_SYNC, "dc1->dc3", b"k", b"v", mac)
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k2", b"v", mac)
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v2", mac)
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v", None)
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v", b"")
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v", mac[:-1])


def test_parts_are_length_prefixed_and_a_tombstone_is_not_an_empty_value() -> None:
    tombstone = sign(KEY, Kind.OFFSET_SYNC, FLOW, b"k", None)
    assert tombstone != sign(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"")
    assert not verify(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"", tombstone)
    # Moving a byte from the key into the value is another message.
    assert sign(KEY, Kind.CONTROL, FLOW, b"ab", b"c") != sign(KEY, Kind.CONTROL, FLOW, b"a", b"bc")


def test_the_signer_writes_the_header_readers_check_and_never_shows_its_key() -> None:
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    header = signer.header(b"k", b"v")
    assert header == (MAC_HEADER, sign(KEY, Kind.OFFSET_SYNC, FLOW, b"k", b"v"))
    assert signer.mac(b"k", None) == sign(KEY, Kind.OFFSET_SYNC, FLOW, b"k", None)
    assert signer.accepts(b"k", b"v", [("other", b"x"), header])
    assert not signer.accepts(b"k", b"v", [("other", b"x")])
    # The last header wins, as Kafka clients read headers: a forger cannot append a bad one
    # behind a good one and have the good one counted... nor the other way round.
    assert not signer.accepts(b"k", b"v", [header, (MAC_HEADER, b"\0" * 32)])
    assert mac_of([header, ("x", b"y")]) == header[1]
    assert KEY.hex() not in repr(signer) and str(list(KEY)) not in repr(signer)
    with pytest.raises(ValueError):
        Signer(b"short", Kind.CONTROL, FLOW)


# -- the key in the store -------------------------------------------------------------------


def test_a_flow_key_is_created_once_and_then_always_the_stored_one(
    migrated_store: StateStore,
) -> None:
    first = key_for(migrated_store, FLOW)
    assert len(first) == KEY_BYTES
    assert key_for(migrated_store, FLOW) == first
    assert key_for(StateStore(migrated_store.url), FLOW) == first  # another process
    assert key_for(migrated_store, "dc2->dc1") != first  # per flow


def test_a_key_created_meanwhile_by_another_process_wins(migrated_store: StateStore) -> None:
    """The primary-key conflict path: the row is there when this process inserts."""
    theirs = b"\x07" * KEY_BYTES
    with migrated_store.session() as session:
        session.add(FlowKey(flow=FLOW, secret=theirs))
    assert create_key(migrated_store, FLOW) == theirs
    with migrated_store.session() as session:
        assert session.scalars(select(FlowKey.flow)).all() == [FLOW]


def test_concurrent_first_users_agree_on_one_key(migrated_store: StateStore) -> None:
    found: list[bytes] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def first_use() -> None:
        store = StateStore(migrated_store.url)
        try:
            start.wait()
            found.append(create_key(store, FLOW))
        except BaseException as err:
            errors.append(err)
        finally:
            store.engine.dispose()

    threads = [threading.Thread(target=first_use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert len(found) == 6 and len(set(found)) == 1
    assert key_for(migrated_store, FLOW) == found[0]


# -- the key derived from signing.secret --------------------------------------------------------

_SECRET = "s" * 40
_CLUSTERS = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
)


def test_a_signing_secret_derives_the_same_key_everywhere_and_no_store_is_asked(
    migrated_store: StateStore, tmp_path: Path
) -> None:
    config = load_config_text(_CLUSTERS + f"signing: {{secret: '{_SECRET}'}}\n", env={})
    keys = keys_of(config, migrated_store)
    assert keys(FLOW) == derive_key(_SECRET.encode(), FLOW) and len(keys(FLOW)) == KEY_BYTES
    assert keys(FLOW) != keys("dc2->dc1")  # per flow
    assert derive_key(b"t" * 40, FLOW) != keys(FLOW)  # per secret
    other = StateStore(f"sqlite:///{tmp_path / 'other.db'}")  # a replaced store: same key
    other.ensure_current()
    assert keys_of(config, other)(FLOW) == keys(FLOW)
    assert keys_of(config, None) is not None  # no store needed at all
    with migrated_store.session() as session:
        assert session.scalars(select(FlowKey.flow)).all() == []  # nothing stored
    # A long-running worker's keys: derived too, with or without a store URL.
    assert FlowKeys(None, _SECRET.encode()).of(FLOW)() == keys(FLOW)
    # Without a secret: the stored key, and none without a store.
    plain = load_config_text(_CLUSTERS, env={})
    assert keys_of(plain, migrated_store)(FLOW) == key_for(migrated_store, FLOW)
    assert keys_of(plain, None) is None


@pytest.mark.parametrize(
    ("signing", "expected"),
    [
        ("{secret: short}", "at least 32 characters"),
        ("{secret: '" + "x" * 40 + "', secret_file: /tmp/x}", "give secret or secret_file"),
        ("{secret_file: /nonexistent/signing}", "secret_file /nonexistent/signing"),
    ],
)
def test_a_bad_signing_secret_is_refused_naming_why(signing: str, expected: str) -> None:
    from drkit.errors import ConfigError

    with pytest.raises(ConfigError, match=expected):
        load_config_text(_CLUSTERS + f"signing: {signing}\n", env={})


def test_a_signing_secret_file_is_read_and_never_shown(tmp_path: Path) -> None:
    from drkit.config.secrets import literal_secrets, redacted_dump

    path = tmp_path / "signing"
    path.write_text(_SECRET + "\n")
    config = load_config_text(_CLUSTERS + f"signing: {{secret_file: '{path}'}}\n", env={})
    assert config.signing.secret_bytes == _SECRET.encode()
    assert _SECRET not in repr(config) and _SECRET not in str(redacted_dump(config))
    # Written out in the file (not ${VAR}, not a file): named as a literal secret.
    assert literal_secrets({"signing": {"secret": _SECRET}}, "") == [".signing.secret"]


# -- offset syncs: a forgery beside real ones -------------------------------------------------


def _real_syncs() -> list[OffsetSync]:
    """Source 0..149 copied to 0..149, then (after a restart) 150..199 to 160..209."""
    tracker = RunTracker(SOURCE, TARGET)
    tracker.observe_range(0, 0, 150)
    tracker.restart()
    tracker.observe_range(150, 160, 50)
    return tracker.drain()


def _write(cluster: FakeCluster, sync: OffsetSync, signer: Signer | None) -> None:
    key, value = sync.key(), sync.value()
    headers = (signer.header(key, value),) if signer is not None else ()
    cluster.write(SYNCS, key, value, headers)


def _read(cluster: FakeCluster, signer: Signer | None) -> RunMaps:
    """What OffsetSyncStore.refresh does with each record the tailer reads."""
    maps = RunMaps(signer)
    for key, value, headers, _offset in cluster.read(SYNCS):
        assert key is not None
        maps.receive(key, value, headers)
    return maps


def _mapping(maps: RunMaps, replicated_end: int) -> PartitionMapping:
    run_map = maps.maps[SOURCE]
    table = run_map.table()
    claims = maps.claims.get(SOURCE, ())
    return PartitionMapping(
        SOURCE, TARGET, table, replicated_end, doubt=doubt(claims, table, replicated_end)
    )


BOUNDS = TargetBounds(0, 210)


def test_a_forged_sync_beside_real_ones_is_ignored_counted_and_changes_no_translation() -> None:
    cluster = FakeCluster("dc2")
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    for sync in _real_syncs():
        _write(cluster, sync, signer)
    far_ahead = OffsetSync(SOURCE, TARGET, OffsetRun(50, 100_000, 100))
    _write(cluster, far_ahead, None)  # a foreign client, no MAC
    _write(cluster, far_ahead, Signer(OTHER, Kind.OFFSET_SYNC, FLOW))  # a guessed key

    # Without verification the forgery wins (the last copy in the target log): a group at 60
    # would resume at 160 - the records at 60..149 it had not read yet skipped.
    fooled = translate(60, _mapping(_read(cluster, None), 200), TargetBounds(0, 200_000))
    assert isinstance(fooled, Translated) and fooled.target_offset == 160

    maps = _read(cluster, signer)
    assert maps.rejected == 2
    mapping = _mapping(maps, 200)
    assert mapping.doubt == ()  # the real runs cover what the forgery claims: nothing hidden
    for offset, expected in ((0, 0), (60, 60), (149, 149), (150, 160), (199, 209), (200, 210)):
        result = translate(offset, mapping, BOUNDS)
        assert isinstance(result, Translated)
        assert result.target_offset == expected
        assert Flag.UNVERIFIED not in result.flags
    exact = translate(60, mapping, BOUNDS)
    assert isinstance(exact, Translated) and exact.method is Method.EXACT


def test_a_forged_tombstone_removes_no_run() -> None:
    cluster = FakeCluster("dc2")
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    real = _real_syncs()
    for sync in real:
        _write(cluster, sync, signer)
    cluster.write(SYNCS, real[0].key(), None)  # a foreign tombstone for the first run
    maps = _read(cluster, signer)
    assert maps.rejected == 1 and maps.stored_runs() == 2
    # drkit's own (signed) tombstone does remove it.
    cluster.write(SYNCS, real[0].key(), None, (signer.header(real[0].key(), None),))
    assert _read(cluster, signer).stored_runs() == 1


def test_ignored_real_runs_round_translation_down_never_past_a_copy() -> None:
    """Runs written before signing (or compacted away under a forgery of their key) are not
    trusted: where they may hide copies, T falls back to the end of the last verified copy
    below S (the log start when there is none) - more re-reads, never a skip."""
    cluster = FakeCluster("dc2")
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    tracker = RunTracker(SOURCE, TARGET)
    tracker.observe_range(0, 0, 50)
    tracker.restart()
    tracker.observe_range(50, 50, 100)  # 50..149 at 50..149: the unsigned one
    tracker.restart()
    tracker.observe_range(150, 160, 50)
    first, unsigned, last = tracker.drain()
    _write(cluster, first, signer)
    _write(cluster, unsigned, None)
    _write(cluster, last, signer)
    maps = _read(cluster, signer)
    mapping = _mapping(maps, 200)
    assert maps.rejected == 1 and mapping.doubt == ((50, 150),)
    result = translate(100, mapping, BOUNDS)
    assert isinstance(result, Translated)
    assert result.target_offset == 50  # the copy of 100 is at 100: re-read from 50, not skipped
    assert Flag.UNVERIFIED in result.flags
    # Without the first run nothing verified lies below: the log start.
    maps = RunMaps(signer)
    for sync in (unsigned, last):
        headers = (signer.header(sync.key(), sync.value()),) if sync is last else ()
        maps.receive(sync.key(), sync.value(), headers)
    result = translate(100, _mapping(maps, 200), TargetBounds(0, 210))
    assert isinstance(result, Translated) and result.target_offset == 0
    # An exact answer is kept; the way back refuses a doubted map.
    exact = translate(160, mapping, BOUNDS)
    assert isinstance(exact, Translated) and exact.target_offset == 170
    assert Flag.UNVERIFIED not in exact.flags
    assert not isinstance(translate_back(TARGET, 100, mapping), Translated)


def test_with_every_sync_rejected_a_group_re_reads_the_replica_from_its_start() -> None:
    """A store that lost the key the workers signed with (replaced, restored without its
    flow_keys) verifies no sync at all: the partition must still translate - to the replica's
    start, flagged - not be left without an answer (a failover would commit nothing, and
    consumers at auto.offset.reset=latest would skip everything they had not read)."""
    cluster = FakeCluster("dc2")
    for sync in _real_syncs():
        _write(cluster, sync, Signer(KEY, Kind.OFFSET_SYNC, FLOW))
    maps = _read(cluster, Signer(OTHER, Kind.OFFSET_SYNC, FLOW))  # the new store's key
    assert maps.rejected == len(_real_syncs()) and maps.stored_runs() == 0
    claims = maps.claims[SOURCE]
    mapping = PartitionMapping(SOURCE, TARGET, (), 200, doubt=doubt(claims, RunTable.of(()), 200))
    for offset in (0, 60, 150, 199):
        result = translate(offset, mapping, TargetBounds(5, 210))
        assert isinstance(result, Translated), result
        assert result.target_offset == 5 and Flag.UNVERIFIED in result.flags


FATES = ("verified", "unsigned", "forged value", "forged tombstone", "undecodable value")
Stream = tuple[list[OffsetRun], list[str], list[int], list[tuple[int, int, bool]], int]


@st.composite
def _streams(draw: st.DrawFn) -> Stream:
    """Real runs in source order with gaps on both sides and what a reader finds of each after
    compaction: its signed record (``verified``), an unsigned one (written before signing), or
    only a foreign writer's record under its key - a value whose length the forger picked, or
    a tombstone - the real one compacted away; then forged claims elsewhere (values and
    tombstones) and a progress record a forger may have set low."""
    runs: list[OffsetRun] = []
    src = draw(st.integers(0, 5))
    dst = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(1, 6))):
        length = draw(st.integers(1, 8))
        runs.append(OffsetRun(src, dst, length))
        src += length + draw(st.integers(0, 3))
        dst += length + draw(st.integers(0, 3))
    fates = draw(st.lists(st.sampled_from(FATES), min_size=len(runs), max_size=len(runs)))
    lengths = draw(st.lists(st.integers(1, 10), min_size=len(runs), max_size=len(runs)))
    forged = draw(
        st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30), st.booleans()), max_size=3)
    )
    progress = draw(st.integers(0, runs[-1].src_end))
    return runs, fates, lengths, forged, progress


@settings(max_examples=500, deadline=None)
@given(_streams())
def test_ignoring_syncs_never_makes_a_translation_skip(stream: Stream) -> None:
    """Invariant 9 over random streams, read through RunMaps with the flow's key: with any
    subset of the real runs unsigned or compacted away under a forgery of their key (a short
    value, one that does not decode, or a tombstone), any forged claims and a forged low
    progress, every replicated record at or after S lies at or after T (security review 6,
    M2; review 11, R11-L1: an undecodable value left no claim)."""
    runs, fates, lengths, forged, progress = stream
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    for run, fate, length in zip(runs, fates, lengths, strict=True):
        real = OffsetSync(SOURCE, TARGET, run)
        key, value = real.key(), real.value()
        if fate == "verified":
            maps.receive(key, value, (signer.header(key, value),))
        elif fate == "unsigned":
            maps.receive(key, value, ())
        elif fate == "forged value":  # under the real key: the forger picks the length
            claim = OffsetSync(SOURCE, TARGET, OffsetRun(run.src_start, run.dst_start, length))
            maps.receive(key, claim.value(), ())
        elif fate == "undecodable value":  # the store logs it and reads on (review 11, R11-L1)
            with suppress(*MALFORMED):
                maps.receive(key, b"\x00" * (length % 4), ())
        else:
            maps.receive(key, None, ())
    for start, length, tombstone in forged:
        claim = OffsetSync(SOURCE, TARGET, OffsetRun(start, 1000 + start, length))
        maps.receive(claim.key(), None if tombstone else claim.value(), ())
    run_map = maps.maps.get(SOURCE)
    kept = run_map.table() if run_map is not None else RunTable.of(())
    claims = maps.claims.get(SOURCE, ())
    mapping = PartitionMapping(SOURCE, TARGET, kept, progress, doubt=doubt(claims, kept, progress))
    bounds = TargetBounds(0, runs[-1].dst_end)
    copies = {run.src_start + i: run.dst_start + i for run in runs for i in range(run.length)}
    for offset in range(runs[-1].src_end + 2):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated), (offset, result)  # even with no verified run
        skipped = [o for o, copy in copies.items() if o >= offset and copy < result.target_offset]
        assert not skipped, (offset, result)
    if all(fate == "verified" for fate in fates) and not forged:
        assert mapping.doubt == ()


def test_the_plan_and_the_translate_report_name_ignored_syncs() -> None:
    finding = unverified_syncs_finding(3, "dc2")
    assert finding.severity is Severity.WARNING
    assert "3 offset syncs on dc2 failed verification and were ignored" in finding.message
    from drkit.offsets.lookup import Report

    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    report = Report(config.flows[0], "live", True, unverified_offset_syncs=2,
                    verified_offset_syncs=7)  # fmt: skip
    assert report.to_json()["unverified_offset_syncs"] == 2
    assert report.to_json()["verified_offset_syncs"] == 7
    assert report.warnings == report.to_json()["warnings"]
    assert "2 offset syncs on dc2 failed verification and were ignored" in report.warnings[0]
    lost = Report(config.flows[0], "live", True, unverified_offset_syncs=2)  # none verified
    assert lost.warnings[0].startswith("none of the 2 offset syncs on dc2 verifies")
    assert Report(config.flows[0], "live", True).warnings == []


# -- directives: a forgery on the control channel ----------------------------------------------


class _StoreDown:
    """The state store as a gate sees it during an outage."""

    def directive(self, flow: str, default: DesiredState) -> FlowDirective:
        raise StateStoreError("state store sqlite:///x failed: disk I/O error")

    def ack(self, *args: object, **kwargs: object) -> None:
        raise StateStoreError("state store sqlite:///x failed: disk I/O error")

    def forget_worker(self, flow: str, worker: str) -> None:
        raise StateStoreError("state store sqlite:///x failed: disk I/O error")


def _flow_config() -> FlowConfig:
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    return config.flows[0]


def test_a_forged_directive_is_ignored_by_the_gate_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flow = _flow_config()
    target = FakeCluster("dc2")
    engine = signed_channel(target, flow, KEY)
    engine.publish(FlowDirective(flow.name, DesiredState.RUNNING, 3, "resume"))
    # A foreign client on the open cluster: PAUSE, epoch 99, under the directive's key.
    topic = control_topic(flow.source)
    forged = b'{"desired":"paused","epoch":99,"reason":"forged","run_id":null}'
    target.write(topic, f"directive/{flow.name}".encode(), forged)
    target.write(topic, f"directive/{flow.name}".encode(), forged, ((MAC_HEADER, b"\0" * 32),))
    target.write(topic, f"ack/{flow.name}/ghost".encode(), b'{"epoch":99,"state":"paused"}')

    rejected: list[int] = []
    gate = FlowGate(
        _StoreDown(), flow.name, "w1", DesiredState.RUNNING, 30.0,
        channel=signed_channel(target, flow, KEY), on_rejected=rejected.append,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="drkit.control.gate"):
        gate.poll_once()
    wanted = gate.wanted()
    assert (wanted.state, wanted.epoch) == (DesiredState.RUNNING, 3)
    assert rejected == [3]
    assert any("failed verification" in r.getMessage() for r in caplog.records)
    # The engine's view: the real directive, no ghost worker's ack.
    view = engine.read()
    assert view.directive == FlowDirective(flow.name, DesiredState.RUNNING, 3, "resume")
    assert "ghost" not in view.acks and view.rejected == 3
    # A channel with another key (another store) trusts nothing it did not sign.
    stranger = signed_channel(target, flow, OTHER).read()
    assert stranger.directive is None and stranger.rejected == 4
    # A real, newer directive is followed.
    engine.publish(FlowDirective(flow.name, DesiredState.PAUSED, 4, "switchover"))
    gate.poll_once()
    assert gate.wanted().state is DesiredState.PAUSED and gate.wanted().epoch == 4
    assert rejected == [3]  # nothing new to report


def test_an_earlier_stores_signed_directive_does_not_outrank_a_new_stores(
    migrated_store: StateStore, tmp_path: Path
) -> None:
    """Epochs count per store, and a new store starts again at 1.  With signing.secret the
    offset-sync keys survive a store swap - the control channel's must not: a directive of the
    old store (epoch 7, RUNNING) replayed on the open topic would outrank the new store's
    STOPPED (epoch 1) for a worker whose store does not answer, and restart it after a
    failover.  So the channel is keyed by the store's own key, never the derived one."""
    config = load_config_text(_CLUSTERS + f"signing: {{secret: '{_SECRET}'}}\n", env={})
    flow = config.flows[0]
    new_store = StateStore(f"sqlite:///{tmp_path / 'new.db'}")
    new_store.ensure_current()
    old_key, new_key = control_keys(migrated_store)(flow.name), control_keys(new_store)(flow.name)
    assert old_key != new_key and keys_of(config, migrated_store)(flow.name) != old_key
    assert FlowKeys(migrated_store.url, _SECRET.encode()).control(flow.name)() == old_key
    target = FakeCluster("dc2")
    signed_channel(target, flow, old_key).publish(
        FlowDirective(flow.name, DesiredState.RUNNING, 7, "old store: resume")
    )
    topic = control_topic(flow.source)
    replay = list(target.read(topic))[-1]
    signed_channel(target, flow, new_key).publish(
        FlowDirective(flow.name, DesiredState.STOPPED, 1, "failover")
    )
    key, value, headers, _offset = replay
    target.write(topic, key, value, headers)  # a foreign writer replays the old record
    gate = FlowGate(
        _StoreDown(), flow.name, "w1", DesiredState.RUNNING, 30.0,
        channel=signed_channel(target, flow, new_key),
    )  # fmt: skip
    gate.poll_once()
    assert (gate.wanted().state, gate.wanted().epoch) == (DesiredState.STOPPED, 1)


def test_records_of_other_flows_on_the_shared_topic_are_not_counted(tmp_path: Path) -> None:
    flow = _flow_config()
    target = FakeCluster("dc2")
    topic = control_topic(flow.source)
    target.write(topic, b"directive/dc1->dc3", b'{"desired":"paused","epoch":1}')
    view = signed_channel(target, flow, KEY).read()
    assert view.directive is None and view.rejected == 0


# -- drkit checkpoint: the standalone checkpoint worker verifies too ---------------------------


def test_drkit_checkpoint_runs_its_worker_with_the_flow_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``drkit checkpoint`` joins the replicators' checkpoint election and may be the one
    that writes checkpoints (and, with sync_group_offsets, group offsets): it must ignore
    forged offset syncs and sign its tombstones as drkit replicate's workers do."""
    from click.testing import CliRunner

    import drkit.offsets.checkpointer as checkpointer
    import drkit.replication_service as service
    from drkit.cli import cli

    seen: list[Signer | None] = []

    class Stub:
        def __init__(self, *args: object, stop: threading.Event, signer: Signer | None,
                     **kwargs: object) -> None:  # fmt: skip
            seen.append(signer)
            stop.set()

        def prepare(self) -> None:
            raise StateStoreError("stop before any Kafka I/O")

        def close(self) -> None:
            pass

    import drkit.cli.preflight as preflight

    monkeypatch.setattr(service, "install_stop_signals", lambda stop: None)
    monkeypatch.setattr(checkpointer, "Checkpointer", Stub)
    monkeypatch.setattr(preflight, "require_flows_answering", lambda *_a: None)  # no cluster
    path = tmp_path / "drkit.yaml"
    path.write_text(_CLUSTERS + f"signing: {{secret: '{_SECRET}'}}\n")
    done = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "state"), "checkpoint", "--config", str(path)]
    )
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    assert len(seen) == 1 and seen[0] is not None
    assert seen[0].secret == derive_key(_SECRET.encode(), FLOW)


# -- invariant 10: copies only rejected records place --------------------------------------------


def _loaded(maps: RunMaps, replicated_end: int, written: Iterable[OffsetRun]) -> PartitionMapping:
    """What the mapping loader builds from ``maps`` (doubt and claimed copies included) over a
    target holding the copies ``written`` wrote (the claims of real runs are corroborated by
    their records: tests/unit/test_claim_corroboration.py)."""
    return loaded(maps, replicated_end, Corroborator(target_log(written), "dc1"))


def test_a_re_replication_under_a_new_key_never_hides_the_old_keys_copies() -> None:
    """A store restored without its flow keys: 0..9 were copied at 0..9 under the old key,
    then a restarted worker re-copied 3..5 at 10..12 under the new one.  Records 6..9 have
    only their old copies; verified runs alone would send a group at 6 (or at 4) past them."""
    maps = RunMaps(Signer(OTHER, Kind.OFFSET_SYNC, FLOW))  # the new key
    old = OffsetSync(SOURCE, TARGET, OffsetRun(0, 0, 10))
    new = OffsetSync(SOURCE, TARGET, OffsetRun(3, 10, 3))
    old_mac = Signer(KEY, Kind.OFFSET_SYNC, FLOW).header(old.key(), old.value())
    maps.receive(old.key(), old.value(), (old_mac,))
    new_mac = Signer(OTHER, Kind.OFFSET_SYNC, FLOW).header(new.key(), new.value())
    maps.receive(new.key(), new.value(), (new_mac,))
    assert (maps.rejected, maps.accepted) == (1, 1)
    mapping = _loaded(maps, 10, [old.run, new.run])
    bounds = TargetBounds(0, 13)
    for offset, most in ((0, 0), (4, 6), (6, 6), (9, 9), (10, 13)):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated), result
        assert result.target_offset <= most, (offset, result)
    at_six = translate(6, mapping, bounds)
    assert isinstance(at_six, Translated) and Flag.UNVERIFIED in at_six.flags
    # Without the claims (the rule before invariant 10) 6 resumed at 13: 6..9 skipped.
    blind = PartitionMapping(SOURCE, TARGET, mapping.table, 10, doubt=mapping.doubt)
    skipped = translate(6, blind, bounds)
    assert isinstance(skipped, Translated) and skipped.target_offset == 13


def test_a_forged_claim_over_a_verified_history_moves_no_group() -> None:
    """A foreign writer's one record claiming any source range at target 0 (review 7, N1):
    where verified runs speak, and at positions verified copies hold, it is not believed - no
    group is sent back to the replica's start."""
    signer = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    real = OffsetSync(SOURCE, TARGET, OffsetRun(0, 0, 1000))
    maps.receive(real.key(), real.value(), (signer.header(real.key(), real.value()),))
    for forged in (OffsetRun(10, 0, 5), OffsetRun(999, 0, 1), OffsetRun(1000, 0, 50)):
        sync = OffsetSync(SOURCE, TARGET, forged)
        maps.receive(sync.key(), sync.value(), ())  # no MAC
    mapping = _loaded(maps, 1000, [OffsetRun(0, 0, 1000)])
    for offset in (10, 500, 999):
        result = translate(offset, mapping, TargetBounds(0, 1000))
        assert isinstance(result, Translated) and result.target_offset == offset, result
        assert result.method is Method.EXACT


@st.composite
def _histories(draw: st.DrawFn) -> tuple[list[OffsetRun], list[bool]]:
    """Copy rounds appended to the target, each from any earlier source offset (a restart
    re-replicates), and which of them verify (the key changed in between, or forged)."""
    runs: list[OffsetRun] = []
    dst = 0
    done = 0
    for _ in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, done))
        length = draw(st.integers(1, 8))
        runs.append(OffsetRun(start, dst, length))
        dst += length
        done = max(done, start + length)
    verified = draw(st.lists(st.booleans(), min_size=len(runs), max_size=len(runs)))
    return runs, verified


@settings(max_examples=400, deadline=None)
@given(_histories())
def test_rejected_runs_never_let_a_translation_skip_a_copy_they_hold(
    history: tuple[list[OffsetRun], list[bool]],
) -> None:
    """Invariant 10 over random histories with re-replication: whichever runs verify, every
    source record at or after S has a copy at or after T (its last copy in the target log)."""
    runs, verified = history
    signer, other = Signer(KEY, Kind.OFFSET_SYNC, FLOW), Signer(OTHER, Kind.OFFSET_SYNC, FLOW)
    maps = RunMaps(signer)
    for run, ok in zip(runs, verified, strict=True):
        sync = OffsetSync(SOURCE, TARGET, run)
        mac = (signer if ok else other).header(sync.key(), sync.value())
        maps.receive(sync.key(), sync.value(), (mac,))
    end = max(run.src_end for run in runs)
    mapping = _loaded(maps, end, runs)
    bounds = TargetBounds(0, runs[-1].dst_end)
    last: dict[int, int] = {}
    for run in runs:
        for i in range(run.length):
            last[run.src_start + i] = run.dst_start + i  # later rounds are later in the log
    for offset in range(end + 1):
        result = translate(offset, mapping, bounds)
        assert isinstance(result, Translated), (offset, result)
        skipped = [o for o, at in last.items() if o >= offset and at < result.target_offset]
        assert not skipped, (offset, result, skipped)
