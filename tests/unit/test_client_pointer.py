"""The pointer clients follow (issue 48 item 3), its pure parts: the record's format, its
signature, the epoch rule, the writer's rule never to bury a newer epoch, and its bounds."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from drkit.client.follow import PointerWatcher
from drkit.client.pointer_record import PointerRecord, PointerSigner, decode, newer, newest
from drkit.config.model import DrkitConfig, SigningConfig
from drkit.errors import KafkaError
from drkit.failover.pointer import Pointer, PointerRepository, pointer_key, pointer_record
from drkit.failover.pointer_topic import PointerPublisher, publish, publish_one
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.keyed_topic import Accept, KeyedValue, Sign, encode_document, keep_latest
from drkit.records import Headers
from drkit.signing import Kind, Signer, derive_key
from drkit.store import StateStore

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


def _record(epoch: int = 3, cluster: str = "dc2", name: str = "default") -> PointerRecord:
    return PointerRecord(name, cluster, epoch, 17, "2026-12-06T10:00:00.000Z",
                         {"dc1": "h1:9092", "dc2": "h2:9092"})  # fmt: skip


# -- the record -------------------------------------------------------------------------------


def test_a_record_reads_back_as_written() -> None:
    record = _record()
    assert decode(record.key(), record.value()) == record
    assert record.bootstrap() == "h2:9092" and record.bootstrap("dc1") == "h1:9092"
    assert record.document()["schema"] == "drkit.pointer.record/v1"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"default", None),  # a tombstone
        (None, _record().value()),
        (b"other", _record().value()),  # the key is not its name
        (b"default", b"not json"),
        (b"default", b"[1, 2]"),
        (
            b"default",
            encode_document({**_record().document(), "schema": "drkit.pointer.record/v2"}),
        ),
        (b"default", encode_document({**_record().document(), "epoch": 0})),
        (b"default", encode_document({**_record().document(), "epoch": True})),
        (b"default", encode_document({**_record().document(), "epoch": "3"})),
        (b"default", encode_document({**_record().document(), "cluster": ""})),
        (b"default", encode_document({**_record().document(), "run_id": "17"})),
        (b"default", encode_document({**_record().document(), "clusters": {"dc1": 9092}})),
        (
            b"default",
            encode_document({k: v for k, v in _record().document().items() if k != "cluster"}),
        ),
    ],
)
def test_what_is_not_a_pointer_record_is_refused(key: bytes | None, value: bytes | None) -> None:
    assert decode(key, value) is None


# -- the signature ----------------------------------------------------------------------------


def test_only_a_record_signed_with_the_pointer_key_is_read() -> None:
    record = _record()
    signer = PointerSigner(KEY)
    signed = signer.headers(record)
    assert signer.read(record.key(), record.value(), signed) == record
    assert signer.read(record.key(), record.value(), None) is None  # unsigned
    assert signer.read(record.key(), record.value(), PointerSigner(OTHER).headers(record)) is None
    tampered = _record(epoch=99)  # the MAC of another value
    assert signer.read(tampered.key(), tampered.value(), signed) is None
    # The same key's MAC of another kind (a control-channel record) never verifies as a pointer.
    control = Signer(KEY, Kind.CONTROL, "default").header(record.key(), record.value())
    assert signer.read(record.key(), record.value(), [control]) is None
    # Another pointer's record, even signed, is not this pointer's.
    elsewhere = _record(name="blue")
    assert signer.read(elsewhere.key(), elsewhere.value(), PointerSigner(KEY, "blue").headers(
        elsewhere)) is None  # fmt: skip


def test_the_pointer_key_is_not_a_flow_key_and_is_stable(tmp_path: Path) -> None:
    secret = "s" * 40
    config = DrkitConfig.model_validate({
        "clusters": {"dc1": {"bootstrap_servers": "h1:9092"}},
        "signing": {"secret": secret},
    })  # fmt: skip
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    key = pointer_key(config, store)
    assert key == pointer_key(config, store) and len(key) == 32
    assert key != derive_key(secret.encode(), "default")
    unsigned = config.model_copy(update={"signing": SigningConfig()})
    stored = pointer_key(unsigned, store)  # no secret: kept in the store, the same every time
    assert stored == pointer_key(unsigned, store) and stored != key


# -- the epoch rule -----------------------------------------------------------------------------


def test_only_a_higher_epoch_moves_the_pointer() -> None:
    assert newer(None, _record(1))
    assert newer(_record(3), _record(4, "dc1"))
    assert not newer(_record(3), _record(3, "dc1"))  # the same move, read on another cluster
    assert not newer(_record(3), _record(2, "dc1"))  # an older move a cluster still holds
    assert newest([_record(2), _record(5, "dc1"), _record(4), _record(5)]) == _record(5, "dc1")
    assert newest([]) is None


def test_a_watcher_follows_only_higher_epochs_and_tells_its_listeners() -> None:
    watcher = PointerWatcher({"dc1": {"bootstrap.servers": "h1:9092"}}, KEY)  # never started
    heard: list[int] = []
    watcher.listen(lambda record: heard.append(record.epoch))
    assert watcher.offer("dc1", _record(2))
    assert not watcher.offer("dc2", _record(2, "dc1"))
    assert not watcher.offer("dc2", _record(1, "dc1"))
    assert watcher.offer("dc2", _record(4, "dc1"))
    assert watcher.current == _record(4, "dc1") and heard == [2, 4]
    assert watcher.wait_above(3, 0.0) == _record(4, "dc1")
    assert watcher.wait_above(4, 0.01) is None


# -- the writer ---------------------------------------------------------------------------------


class _Topic:
    """A pointer topic in memory: records appended, read back through the real fold."""

    def __init__(self, sign: Sign, accept: Accept) -> None:
        self.sign, self.accept = sign, accept
        self.records: list[tuple[bytes | None, bytes | None, Headers, int]] = []
        self.puts = 0
        self.closed = False

    def append(self, key: bytes, value: bytes, headers: Headers) -> None:
        self.records.append((key, value, headers, len(self.records)))

    def put(self, key: str, value: dict[str, Any], timeout_s: float = 10.0) -> None:
        data = encode_document(value)
        self.puts += 1
        self.append(key.encode(), data, tuple(self.sign(key.encode(), data)))  # type: ignore[arg-type]

    def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]:
        latest: dict[str, KeyedValue] = {}
        keep_latest(self.records, self.accept, latest)
        return latest

    def close(self) -> None:
        self.closed = True


def _signing() -> tuple[Sign, Accept]:
    signer = PointerSigner(KEY)
    return (lambda k, v: [signer.header(k, v)],
            lambda k, v, h: signer.read(k, v, h) is not None)  # fmt: skip


def test_a_record_is_written_over_an_older_epoch_never_over_a_newer_one() -> None:
    topic = _Topic(*_signing())
    assert publish_one(topic, _record(3), 1.0) == 3 and topic.puts == 1
    assert publish_one(topic, _record(3), 1.0) == 3 and topic.puts == 1  # held already
    assert publish_one(topic, _record(5), 1.0) == 5 and topic.puts == 2
    # A frozen engine's late write of an older move changes nothing.
    assert publish_one(topic, _record(4, "dc1"), 1.0) == 5 and topic.puts == 2
    assert decode(*topic.records[-1][:2]) == _record(5)


def test_a_forged_newer_record_does_not_hold_the_real_one_back() -> None:
    topic = _Topic(*_signing())
    forged = _record(99, "dc1")
    topic.append(forged.key(), forged.value(), tuple(PointerSigner(OTHER).headers(forged)))
    assert publish_one(topic, _record(3), 1.0) == 3 and topic.puts == 1


def _config(*clusters: str) -> DrkitConfig:
    return DrkitConfig.model_validate(
        {"clusters": {c: {"bootstrap_servers": f"{c}:9092"} for c in clusters}}
    )


def test_a_cluster_that_does_not_answer_costs_the_write_its_wait_once() -> None:
    config = _config("dc1", "dc2", "dc3")
    topics: dict[str, _Topic] = {}
    release = threading.Event()

    class _Hanging(_Topic):
        def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]:
            release.wait(30)  # a dead cluster: librdkafka's own timeout, far beyond the wait
            raise KafkaError("dc1: no answer")

    def make(endpoint: ClusterEndpoint, name: str, sign: Sign, accept: Accept) -> _Topic:
        assert name == config.failover.pointer_topic
        topic = (_Hanging if endpoint.alias == "dc1" else _Topic)(sign, accept)
        topics[endpoint.alias] = topic
        return topic

    outcome = publish(config, _record(3), KEY, make, ["dc2", "dc1", "dc3"], wait_s=5.0,
                      first="dc2", others_s=0.2)  # fmt: skip
    # It returned while dc1 was still being asked (its reader blocks until released): the
    # write waited for the target and gave the others their short grace, not dc1's timeout.
    hung = outcome["dc1"]
    release.set()
    assert not hung.done and hung.error is None
    assert outcome["dc2"].epoch == 3 and outcome["dc3"].epoch == 3
    assert topics["dc2"].puts == 1 and topics["dc2"].closed


def test_a_cluster_known_down_is_asked_but_never_waited_for() -> None:
    """An unplanned move's source, found down by the plan, costs the pointer's write nothing:
    not even the others' grace (here 600 s, so waiting for it would hang the call)."""
    config = _config("dc1", "dc2", "dc3")
    release, asked = threading.Event(), threading.Event()

    class _Hanging(_Topic):
        def latest(self, timeout_s: float = 5.0) -> dict[str, KeyedValue]:
            asked.set()
            release.wait(600)
            raise KafkaError("dc1: no answer")

    def make(endpoint: ClusterEndpoint, name: str, sign: Sign, accept: Accept) -> _Topic:
        return (_Hanging if endpoint.alias == "dc1" else _Topic)(sign, accept)

    outcome: dict[str, Any] = {}

    def write() -> None:
        clusters = ["dc2", "dc1", "dc3"]
        outcome.update(
            publish(config, _record(3), KEY, make, clusters, wait_s=600.0, first="dc2",
                    others_s=600.0, unwaited=["dc1"])
        )  # fmt: skip

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(60)  # a guard far below the 600 s a wait for dc1 would take
    try:
        assert not writer.is_alive(), "the write waited for a cluster known to be down"
        assert outcome["dc2"].epoch == 3 and outcome["dc3"].epoch == 3
        assert not outcome["dc1"].done
        assert asked.wait(60)  # asked all the same: written should it answer in time
    finally:
        release.set()


def test_the_maintenance_asks_only_clusters_not_known_to_hold_the_pointer(tmp_path: Path) -> None:
    config = _config("dc1", "dc2")
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    asked: list[str] = []
    down = {"dc1"}
    kept: dict[str, _Topic] = {}

    def make(endpoint: ClusterEndpoint, name: str, sign: Sign, accept: Accept) -> _Topic:
        asked.append(endpoint.alias)
        if endpoint.alias in down:
            raise KafkaError(f"{endpoint.alias}: down")
        return kept.setdefault(endpoint.alias, _Topic(sign, accept))

    publisher = PointerPublisher(config, store, make)
    assert publisher.converge() == {}  # no pointer yet: nothing to publish
    moved = PointerRepository(store).move("dc2", 7)
    first = publisher.converge()
    assert first["dc2"].epoch == moved.epoch and first["dc1"].error == "dc1: down"
    asked.clear()
    down.clear()
    second = publisher.converge()  # dc1 answers again: only it is asked
    assert asked == ["dc1"] and second["dc1"].epoch == moved.epoch
    assert publisher.converge() == {}
    record = decode(*kept["dc1"].records[-1][:2])
    assert record == pointer_record(
        Pointer(moved.name, "dc2", moved.epoch, 7, moved.updated_at), config
    )


def test_a_drill_writes_its_own_pointer_topic_and_cleans_up_only_that_one() -> None:
    from drkit.drills.footprint import footprint

    def drill(**failover: str) -> DrkitConfig:
        return DrkitConfig.model_validate({
            "clusters": {"dc1-ab12": {"bootstrap_servers": "h1:9092"},
                         "dc2-ab12": {"bootstrap_servers": "h2:9092"}},
            "flows": [{"source": "dc1-ab12", "target": "dc2-ab12"}],
            "failover": failover,
        })  # fmt: skip

    own = footprint("d", drill(pointer_topic="drkit-pointer.ab12.internal"), [], [])
    assert "drkit-pointer.ab12.internal" in own.topics
    # A drill directory written before drills had their own: the operator's topic is never
    # a drill's to delete.
    assert "drkit-pointer.internal" not in footprint("d", drill(), [], []).topics
    with pytest.raises(ValueError, match=r"ending in \.internal"):
        drill(pointer_topic="pointers")


def test_the_maintenance_creates_the_topic_before_any_move(tmp_path: Path) -> None:
    """A watcher finds a topic created after it started only at its next metadata refresh:
    the topic is there before the first move - on a cluster that was down, once it
    answers."""
    from tests.fake_kafka import FakeClusters

    config = _config("dc1", "dc2")
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    clusters = FakeClusters("dc1", "dc2")
    clusters["dc1"].up = False
    publisher = PointerPublisher(
        config, store, lambda e, n, s, a: _Topic(s, a), connect=clusters.connect
    )
    assert publisher.converge() == {}  # no pointer yet: nothing published, the topic made
    topic = config.failover.pointer_topic
    assert topic in clusters["dc2"].topics and topic not in clusters["dc1"].topics
    clusters["dc1"].up = True
    publisher.converge()
    assert topic in clusters["dc1"].topics
    asked = len(clusters["dc2"].calls)
    publisher.converge()
    assert len(clusters["dc2"].calls) == asked  # made once: not asked again
