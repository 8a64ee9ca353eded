"""The simulated world the control plane runs in: clusters, a state store, registries, the
replication data path as a model, applications - every call of drkit into it a scheduling point.

What is real: the failover engine and its runbooks (the shipped YAML), the steps (but two, see
below), the lease, the reconciler of protections, the monitor's maintenance duty, the workers'
flow gate (drkit.control.gate) and a SQLite state store migrated by drkit's own migrations.
What is simulated: the clusters (tests/fake_kafka.py: topics, offsets, groups, ACLs judged as
Kafka's authorizer does), the schema registries (modes), the data path (a worker copies records
one for one and keeps its progress in :class:`Replication`), follow_standbys' follow-on copy
(the step is real - its hold, reachability, lease and pending commands - but the copy reads
records by provenance, which the model does not keep: it copies nothing), and two steps that
read records:
``translate_offsets`` (drkit's own pieces over the model's offset-sync topic: each copy a run
signed with the key its worker holds, read back as the failover reads it - verified with the
key drkit's ``keys_of`` gives the step, the rest doubted - and translated by
drkit.translation) and
failback's ``capture_divergent_tail`` (counted from the model).  Applications write to the
cluster they believe is the primary, or - stale - to another one.

The flows' signing keys (drkit/store/flow_keys.py) are read as drkit reads them: a worker
through the replicator's ``FlowKeys`` (each flow's key once, when it starts, then kept), the
translate step through ``keys_of(config, store)``.  Without ``signing.secret`` they live in the
state store; with it (a share of the schedules, :attr:`SimWorld.secret`) every key is derived
from it and the store is never asked.  Those reads do not park (no scheduling point, no
outage): points there would reshuffle every schedule the regression and mutation seeds name.
:meth:`SimWorld.lose_flow_keys` is the store restored from a backup, or migrated, without its
``flow_keys`` rows: what holds a key keeps it, the next reader creates a fresh one - unless the
keys are derived from the secret.  The control channel is the model's (unsigned, FakeChannel):
drkit keys it by the store's own key whatever the config says (``control_keys``), which the
model does not exercise.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import shutil
import sqlite3
import tempfile
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import delete, event
from sqlalchemy.orm import Session

from drkit import clock as drkit_clock
from drkit.config import load_config_text
from drkit.config.loader import flow_between
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.control.channel import ChannelFactory
from drkit.control.gate import FlowGate
from drkit.control.model import DesiredState, default_state
from drkit.control.repo import ControlRepository
from drkit.errors import KafkaError, StateStoreError
from drkit.failover.context import ProgressReading, StepContext, StepOutcome
from drkit.failover.engine import Engine
from drkit.failover.hooks import Hook, HookOutcome
from drkit.failover.model import (
    Finding,
    PartitionMove,
    Plan,
    Procedure,
    Severity,
    StepName,
)
from drkit.failover.results import GroupTranslation, Translation
from drkit.failover.run_result import RunOptions
from drkit.failover.snapshot import sync_signer
from drkit.failover.steps.standbys import Follower, follow_standbys_with
from drkit.kafka.admin import TopicSpec
from drkit.kafka.clients import ClusterEndpoint
from drkit.lag import PartitionRpo
from drkit.offsets.corroboration import Corroborator
from drkit.offsets.follow_on import Copied
from drkit.offsets.mapping_loader import doubt
from drkit.offsets.repoint_inputs import RepointReport
from drkit.records import Headers, Record, TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.offset_sync_store import RunMaps
from drkit.replication.progress import Progress
from drkit.replication.run_map import RunTable
from drkit.schemas.catalogue import SchemaVersion
from drkit.signing import Kind, Signer
from drkit.store.db import StateStore
from drkit.store.flow_keys import FlowKeys, keys_of
from drkit.store.models import FlowKey
from drkit.topology.flow import FlowTopology
from drkit.translation import (
    CannotTranslate,
    PartitionMapping,
    TargetBounds,
    translate_partition,
)
from tests.fake_kafka import FakeChannel, FakeCluster, FakeClusters, FakeReplicaRecords
from tests.simulation.scheduler import Sim

APP, REPLICATOR = "User:app", "User:repl"
CLUSTERS = ("dc1", "dc2")
TOPICS = ("orders.a", "orders.b")
GROUPS = ("app.billing", "app.ledger")
LEASE_TTL_S = 6.0
WORKER_ROUND_S = 2.0  # a worker polls its gate and copies once a round
SESSION_TIMEOUT_S = 10.0  # a member silent this long leaves its flow's group
WORKERS_PER_FLOW = 2
SILENCE_S = 6.0

CONFIG = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9"
    principals: {replicator: "User:repl", app-producer: "User:app"}
    schema_registry: {url: "http://127.0.0.1:1/apis/ccompat/v7"}
  dc2:
    bootstrap_servers: "127.0.0.1:10"
    principals: {replicator: "User:repl", app-producer: "User:app"}
    schema_registry: {url: "http://127.0.0.1:2/apis/ccompat/v7"}
flows:
  - source: dc1
    target: dc2
    topics: {include: ["orders[.].*"]}
    groups: {include: ["app[.].*"]}
    schema_sync: {enabled: true}
  - source: dc2
    target: dc1
    standby: true
    topics: {include: ["orders[.].*"]}
    groups: {include: ["app[.].*"]}
    schema_sync: {enabled: true}
failover:
  lease_ttl_s: 6
  worker_silence_s: 6
  switchover_timeout_s: 60
  hooks:
    - {when: before, step: move_pointer, command: ["maybe-veto"]}
    - {when: after, step: move_pointer, command: ["publish-pointer"]}
"""


@dataclass(frozen=True)
class Topology:
    """Which clusters a schedule's world has and how its config wires them: ``clusters`` in
    the order the driver draws among them, ``standbys`` the clusters :data:`CONFIG`'s dc2 is
    copied into - each with dc1 -> it and its standby flow back, as dc2 has; and whether the
    applications create their topics on a primary that has none."""

    name: str
    clusters: tuple[str, ...]
    standbys: tuple[str, ...] = ()
    # The applications create their topics on a primary that has none of its own (a former
    # standby): off in two-dc, whose seeds replay the schedules they always did.
    apps_create_topics: bool = False


# The default: dc1 -> dc2 (and dc2 -> dc1, standby) - what the seeds of regressions.txt and
# test_mutations.py replay.
TWO_DC = Topology("two-dc", CLUSTERS)
# dc1 -> dc2 and dc1 -> dc3 (and each standby flow back to dc1): a move goes from dc1 to
# either standby and back; nothing re-points the other standby after a move (issue 48
# item 1: not built) - dc3 keeps following dc1 while dc2 is the primary.
THREE_DC = Topology("three-dc", (*CLUSTERS, "dc3"), ("dc3",), apps_create_topics=True)
TOPOLOGIES = {topology.name: topology for topology in (TWO_DC, THREE_DC)}


@functools.cache
def _document(topology: Topology = TWO_DC) -> dict[str, Any]:
    """:data:`CONFIG` parsed, with ``topology``'s further standbys wired as dc2 is (once: each
    schedule changes a copy)."""
    found: dict[str, Any] = yaml.safe_load(CONFIG)
    clusters, flows = found["clusters"], found["flows"]
    for number, alias in enumerate(topology.standbys, start=3):
        cluster = copy.deepcopy(clusters["dc2"])
        cluster["bootstrap_servers"] = f"127.0.0.1:{8 + number}"
        cluster["schema_registry"]["url"] = f"http://127.0.0.1:{number}/apis/ccompat/v7"
        clusters[alias] = cluster
        forward, back = (copy.deepcopy(flow) for flow in flows[:2])
        forward["target"] = back["source"] = alias
        flows += [forward, back]
    return found


@functools.lru_cache(maxsize=4)
def _config(
    runbooks: str, path: str, secret: str | None, topology: Topology = TWO_DC
) -> DrkitConfig:
    """A schedule's config: :data:`CONFIG` (for ``topology``) with its runbooks, its store and
    - given - its ``signing.secret``, loaded as drkit loads it; frozen, so schedules alike
    share it (most have no secret, and their store is the template's work file)."""
    document = copy.deepcopy(_document(topology))
    document["failover"]["runbooks_dir"] = runbooks
    document["state_store"] = {"url": f"sqlite:///{path}"}
    if secret is not None:
        document["signing"] = {"secret": secret}
    return load_config_text(yaml.safe_dump(document), env={})


def signing_secret(seed: int) -> str:
    """The ``signing.secret`` of a schedule that has one: its own, from its seed (64 hex)."""
    return zlib.crc32(b"drkit-sim-secret %d" % seed).to_bytes(4, "big").hex() * 8


# -- the store --------------------------------------------------------------------------------


class Template:
    """A state store migrated once; each schedule works on its content restored into one work
    file (:meth:`restore`, SQLite's backup), through stores made once and engines kept from
    schedule to schedule (:meth:`open`): SQLAlchemy compiles each statement once per engine - a
    schedule's fresh engines compiled every statement again (~9% of a schedule's CPU)."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="drkit-sim-", dir=_fast_tmp()))
        self.path = self.directory / "template.db"
        store = StateStore(f"sqlite:///{self.path}")
        store.upgrade()
        with store.engine.connect() as connection:  # everything into the file itself (WAL)
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        store.engine.dispose()
        self._works = 0
        self.work = self.directory / "work0.db"
        # By role, over :attr:`work`: the first store's attributes (its engine among them).
        self._stores: dict[str, dict[str, Any]] = {}

    def restore(self) -> Path:
        """The work file, holding the template's content again (its kept engines' pooled
        connections idle: no transaction open)."""
        with (
            contextlib.closing(sqlite3.connect(self.path)) as source,
            contextlib.closing(sqlite3.connect(self.work)) as target,
        ):
            source.backup(target)
        return self.work

    def open(self, store: StateStore, role: str) -> None:
        """``store`` made a StateStore over :attr:`work` for ``role``: the first time by its
        ``__init__`` (the file's checks, an engine), every later time with the first one's
        attributes - its engine, with its compiled statements and pooled connections, its
        session factory - as the file is the same (a config, not a store, is what differs)."""
        kept = self._stores.get(role)
        if kept is None:
            StateStore.__init__(store, f"sqlite:///{self.work}")
            self._stores[role] = dict(vars(store))
        else:
            vars(store).update(kept)

    def store(self, role: str) -> StateStore:
        """A plain StateStore over :attr:`work` (:meth:`open`)."""
        store = StateStore.__new__(StateStore)
        self.open(store, role)
        return store

    def discard(self) -> None:
        """Let go of the kept engines (a thread of a schedule outlived it, maybe in a
        transaction): the next schedule works on a fresh file with fresh engines."""
        for kept in self._stores.values():
            kept["engine"].dispose()
        self._stores = {}
        self._works += 1
        self.work = self.directory / f"work{self._works}.db"

    def close(self) -> None:
        for kept in self._stores.values():
            kept["engine"].dispose()
        shutil.rmtree(self.directory, ignore_errors=True)


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


# Tables the checker does not read: their writes (workers' acks twice a second, lease
# renewals) do not invalidate its view.
_UNWATCHED = ("FLOW_ACKS", "LEASES", "OBSERVER", "FLOW_STATUS", "HEALTH")
# Updates that change only what the checker does not read (timestamps, a run's lease, a
# step's detail): the fences' pass stamps every row it confirms, the engine's renewals.
_UNREAD_UPDATES = (
    "UPDATE FENCES SET UPDATED_AT=? WHERE",
    "UPDATE FAILOVER_RUNS SET LEASE_EXPIRES_AT=? WHERE",
    "UPDATE FAILOVER_RUNS SET LEASE_OWNER=?, LEASE_EXPIRES_AT=? WHERE",
    "UPDATE FAILOVER_STEPS SET FINISHED_AT=? WHERE",
    "UPDATE FAILOVER_STEPS SET DETAIL=? WHERE",
)


def _counted(statement: str) -> str | None:
    """The table a statement changes rows of that the checker reads (:attr:`SimStore.writes`);
    None if it changes none ("?": one it cannot name)."""
    head = statement.lstrip()[:64].upper()
    if not (
        head[:6] in ("INSERT", "UPDATE", "DELETE")
        and not any(table in head[:40] for table in _UNWATCHED)
        and not head.startswith(_UNREAD_UPDATES)
    ):
        return None
    words = head.split()
    named = words[1] if words[0] == "UPDATE" else words[2] if len(words) > 2 else "?"
    return named.split("(", 1)[0].strip('"') or "?"


_COUNTED: dict[str, str | None] = {}  # statement -> _counted(statement)


class SimStore(StateStore):
    """The state store as the simulated processes see it: on simulated time, a point before
    and after every transaction, away while :attr:`down_until` lies ahead."""

    def __init__(self, sim: Sim, template: Template) -> None:
        template.open(self, "store")
        self.sim = sim
        self.now = sim.wall
        self.down_until = -1.0
        self.writes = 0  # statements that changed rows: the checker's cache key
        self.table_writes: dict[str, int] = {}  # ... by table
        self.open = 0  # transactions open now (a thread parked in one: not committed yet)
        event.listen(self.engine, "after_cursor_execute", self._count_writes)

    def _count_writes(self, *args: Any) -> None:
        statement = args[2]
        if statement in _COUNTED:
            table = _COUNTED[statement]
        else:
            table = _counted(statement)
            if len(_COUNTED) < 4096:  # SQLAlchemy's statements are the same few, over and over
                _COUNTED[statement] = table
        if table is not None:
            self.writes += 1
            self.table_writes[table] = self.table_writes.get(table, 0) + 1

    @contextmanager
    def session(self) -> Iterator[Session]:
        self.sim.point("store")
        if self.sim.now < self.down_until and self.sim.current() is not None:
            raise StateStoreError("state store sqlite:///sim failed: unreachable (simulated)")
        self.open += 1
        try:
            with super().session() as session:
                yield session
        finally:
            self.open -= 1
        self.sim.point("store committed")


class SimReader(StateStore):
    """The checker's store: inside :meth:`batch` every repository reads in the one transaction
    the batch opened (the simulated threads are all parked: nothing commits meanwhile)."""

    def __init__(self, template: Template) -> None:
        template.open(self, "reader")
        self._shared: Session | None = None

    @contextmanager
    def session(self) -> Iterator[Session]:
        if self._shared is not None:
            yield self._shared
            return
        with super().session() as session:
            yield session

    @contextmanager
    def batch(self) -> Iterator[None]:
        with super().session() as session:
            self._shared = session
            try:
                yield
            finally:
                self._shared = None


# -- clusters and registries ------------------------------------------------------------------


class SimCluster(FakeCluster):
    """A fake cluster whose every admin call is a scheduling point (and one after a change);
    :attr:`version` grows with every change of its ACLs, topics or reachability (the checker
    caches what applications may write by it)."""

    def __init__(self, alias: str, sim: Sim) -> None:
        super().__init__(alias, brokers=1)
        self.sim = sim
        self.version = 0

    def _answer(self, call: str) -> None:
        self.sim.point(f"{self.alias}.{call}")
        super()._answer(call)

    def _after(self, call: str) -> None:
        self.version += 1
        self.sim.point(f"{self.alias}.{call} applied")
        super()._after(call)

    def add_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> None:
        self.version += 1
        super().add_topic(name, partitions, configs)

    def go_down(self) -> None:
        self.version += 1
        super().go_down()

    def come_back(self) -> None:
        self.version += 1
        super().come_back()


class SimRegistry:
    """A schema registry with a mode (drkit.schemas.sync.RegistryPort); no schemas."""

    def __init__(self, alias: str, sim: Sim) -> None:
        self.alias, self.sim = alias, sim
        self.current = "READWRITE"
        self.down = False

    def _answer(self, call: str) -> None:
        from drkit.errors import SchemaRegistryError

        self.sim.point(f"{self.alias}.registry.{call}")
        if self.down:
            raise SchemaRegistryError(f"schema registry of {self.alias} is unreachable")

    def catalogue(self) -> tuple[SchemaVersion, ...]:
        self._answer("catalogue")
        return ()

    def export_archive(self) -> bytes:
        self._answer("export")
        return b""

    def import_archive(self, archive: bytes) -> None:
        self._answer("import")

    def mode(self) -> str | None:
        self._answer("mode")
        return self.current

    def set_mode(self, mode: str) -> str:
        self._answer("set_mode")
        self.current = mode
        return mode


# -- the data path and the applications, as a model -------------------------------------------


@dataclass
class Append:
    at: float
    flow: str
    worker: str
    cluster: str
    topic: str
    count: int


Sync = tuple[bytes, bytes, Headers]


@dataclass
class Replication:
    """Per flow and source partition, the next source offset copied (the progress topic);
    which workers are in each flow's group (their last round: the group coordinator's view);
    per flow, the offset-sync topic (one signed run per copy, in order); per flow and source
    partition, where each copied source record's last copy lies on the target (the truth the
    checker judges a group's new position by - never read by drkit)."""

    progress: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    appends: list[Append] = field(default_factory=list)
    rounds: dict[tuple[str, str], float] = field(default_factory=dict)
    syncs: dict[str, list[Sync]] = field(default_factory=dict)
    copies: dict[tuple[str, TopicPartition], dict[int, int]] = field(default_factory=dict)
    # Every copy's record on its replica, with its drkit-src: what the mapping loader reads to
    # corroborate the copies rejected offset syncs claim (drkit.offsets.corroboration).
    records: FakeReplicaRecords = field(default_factory=FakeReplicaRecords)

    def owner(self, flow: str, tp: TopicPartition, now: float) -> str | None:
        """The worker a partition is assigned to: the flow's members alive within the session
        timeout, round-robin (a frozen worker's partitions move to the others)."""
        members = sorted(
            worker
            for (name, worker), at in self.rounds.items()
            if name == flow and now - at <= SESSION_TIMEOUT_S
        )
        if not members:
            return None
        return members[(zlib.crc32(tp.topic.encode()) + tp.partition) % len(members)]


class ModelProgress:
    """A flow's progress as drain and replicate_back read it (context.ProgressReading)."""

    def __init__(self, world: SimWorld, topology: FlowTopology) -> None:
        self.world, self.topology = world, topology

    def refresh(self) -> Mapping[TopicPartition, Progress]:
        self.world.clusters[self.topology.target]._answer("read progress")
        return {
            tp: Progress(tp, offset)
            for (flow, tp), offset in self.world.replication.progress.items()
            if flow == self.topology.name
        }

    def close(self) -> None:
        pass


# -- the world --------------------------------------------------------------------------------


class SimWorld:
    """Everything one schedule runs against; built fresh per seed."""

    def __init__(
        self, sim: Sim, template: Template, secret: bool = False, topology: Topology = TWO_DC
    ) -> None:
        """``secret``: ``signing.secret`` is configured (the flows' offset-sync keys are
        derived from it, none kept in the store); ``topology``: its clusters and flows."""
        self.sim = sim
        self.secret = secret
        self.topology = topology
        self.aliases = topology.clusters
        path = template.restore()
        runbooks = path.parent / "runbooks"
        if not runbooks.exists():
            shutil.copytree(Path(__file__).resolve().parents[2] / "runbooks", runbooks)
        self.config = _config(
            str(runbooks), str(path), signing_secret(sim.seed) if secret else None, topology
        )
        self.template = template
        self.store = SimStore(sim, template)
        self.reader = SimReader(template)  # the checker's: no points, no outages
        self.reader.now = sim.wall
        self.keystore = template.store("keystore")  # flow keys: no points, no outages
        self.keystore.now = sim.wall
        # Per run, what its translate step last read on the source: (flow, (group, partition)
        # -> committed offset); nothing when the source did not answer (the model has no
        # checkpoints).
        self.translated: dict[int, tuple[str, dict[tuple[str, TopicPartition], int]]] = {}
        # Every read of a flow's offset syncs by a translate step: (run, flow, how many failed
        # verification, how many times the store had lost its flow keys by then).
        self.sync_reads: list[tuple[int, str, int, int]] = []
        self.keys_lost = 0  # how many times the store lost its flow keys
        self.clusters = FakeClusters(*self.aliases, make=lambda alias: SimCluster(alias, sim))
        self.registries = {alias: SimRegistry(alias, sim) for alias in self.aliases}
        self.replication = Replication()
        self.published_epoch = 0  # what the "publish-pointer" hook last published
        self.hooked_runs: set[int] = set()  # runs whose after move_pointer hook ran
        self.veto_rate = 0.25  # how often the operator's check before move_pointer says no
        self.super_writes: dict[tuple[str, TopicPartition], int] = {}  # ACLs do not stop these
        self.state_dir = path.parent
        for alias in self.aliases:
            cluster = self.clusters[alias]
            cluster.open = True
        for topic in TOPICS:
            self.clusters["dc1"].add_topic(topic, 2)

    def close(self) -> None:
        """Let go of the schedule's store: its engines stay with the template for the next
        schedule - unless a thread of this one still runs (it may hold a transaction)."""
        event.remove(self.store.engine, "after_cursor_execute", self.store._count_writes)
        if any(not t.done for p in self.sim.processes for t in p.threads):
            self.template.discard()

    def cluster(self, alias: str) -> SimCluster:
        found = self.clusters[alias]
        assert isinstance(found, SimCluster)
        return found

    def flow(self, name: str) -> FlowConfig:
        return self.config.flow(name)

    def targets_of(self, source: str) -> tuple[str, ...]:
        """The clusters a move from ``source`` can go to: its flows' targets, in the config's
        order (two clusters: the other one)."""
        return tuple(flow.target for flow in self.config.flows if flow.source == source)

    def channels(self) -> ChannelFactory:
        def channel(flow: FlowConfig) -> FakeChannel:
            return FakeChannel(self.clusters[flow.target], flow.name)

        return channel

    # -- actors' building blocks -----------------------------------------------------------

    def engine(self, role: str = "engine") -> SimEngine:
        return SimEngine(self, role)

    def run_hook(self, hook: Hook, context: dict[str, Any]) -> HookOutcome:
        """``maybe-veto`` (before move_pointer) vetoes now and then - an operator's check that
        says no; ``publish-pointer`` (after it) is a client-config writer that refuses an epoch
        older than the one it last published (it gets the pointer's epoch in the context)."""
        self.sim.point(f"hook {hook.command[0]}")
        if hook.command[0] == "maybe-veto":
            code = 3 if self.sim.rng.random() < self.veto_rate else 0
            return HookOutcome(hook.command, hook.when, hook.step, code, False, "no")
        epoch = context.get("pointer_epoch")
        run = context.get("run")
        if isinstance(run, int):
            self.hooked_runs.add(run)
        if isinstance(epoch, int) and epoch >= self.published_epoch:
            self.published_epoch = epoch
        return HookOutcome(hook.command, hook.when, hook.step, 0, False, f"epoch {epoch}")

    def progress_reader(self, topology: FlowTopology, _target: ClusterEndpoint) -> ProgressReading:
        return ModelProgress(self, topology)

    # -- the flows' signing keys --------------------------------------------------------------

    def lose_flow_keys(self) -> None:
        """The state store restored from a backup, or migrated to a new database, without its
        ``flow_keys`` rows (pointer, lease, runs and the rest kept): every process that holds
        a key keeps it, the next one to ask creates a fresh key."""
        with self.keystore.session() as session:
            session.execute(delete(FlowKey))
        self.keys_lost += 1
        self.sim.log("state store restored without its flow keys")

    def flow_keys(self) -> FlowKeys:
        """A replication process's flow keys (drkit.replication_service): derived from the
        configured secret, else each read from the store once and kept."""
        return _SimFlowKeys(self)

    def offset_maps(
        self, topology: FlowTopology
    ) -> tuple[dict[TopicPartition, PartitionMapping], int]:
        """A flow's offset maps as a failover reads them (drkit.offsets.mapping_loader), and how
        many syncs failed verification: every sync of the flow received through drkit's RunMaps
        with the key ``keys_of(config, store)`` gives now (derived from the secret; else the
        store's - a fresh one if it lost the key), the ranges of those that fail verification
        doubted, and where they say they copied them believed as far as the replica's records
        corroborate it - a fresh loader's Corroborator, as a failover's (invariants 9, 10)."""
        flow = topology.name
        signer = sync_signer(keys_of(self.config, self.keystore), flow)
        maps = RunMaps(signer)
        for key, value, headers in self.replication.syncs.get(flow, ()):
            maps.receive(key, value, headers)
        progress = {
            tp: end for (name, tp), end in self.replication.progress.items() if name == flow
        }
        out = {}
        target_cluster = self.clusters[topology.target]
        corroborator = Corroborator(
            _Replicas(self.replication.records, target_cluster), topology.source
        )
        for source in maps.maps.keys() | progress.keys() | maps.claims.keys():
            run_map = maps.maps.get(source)
            targets = run_map.targets() if run_map is not None else frozenset()
            split = len(targets) > 1
            target = next(iter(targets)) if len(targets) == 1 else None
            table = run_map.table() if run_map is not None and not split else ()
            replicated_end = progress.get(source)
            claims = maps.claims.get(source, ())
            runs = RunTable.of(table)
            doubted = doubt(claims, runs, replicated_end) if claims else ()
            replica = target or topology.target_partition(source)
            copies = maps.claimed_copies.get(source, ())
            out[source] = PartitionMapping(
                source=source,
                target=replica,
                runs=runs,
                replicated_end=replicated_end,
                split=split,
                doubt=doubted,
                claimed=corroborator.claimed(source, replica, copies, runs, doubted),
            )
        return out, maps.rejected


class _Replicas:
    """The replicas as the mapping loader reads them (drkit.offsets.corroboration's
    TargetRecords): the copies' records, the partitions' ends from the target cluster."""

    def __init__(self, records: FakeReplicaRecords, cluster: FakeCluster) -> None:
        self.records, self.cluster = records, cluster

    def records_from(self, tp: TopicPartition, offset: int) -> Generator[Record, None, None]:
        return self.records.records_from(tp, offset)

    def end_offset(self, tp: TopicPartition) -> int:
        return self.cluster._partition(tp).end


class _SimFlowKeys(FlowKeys):
    """drkit's FlowKeys over the world's key store (no points, no outages; never migrated
    again): the replicator's way to each flow's key."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(str(world.keystore.engine.url), world.config.signing.secret_bytes)
        self._world = world

    def _open(self) -> StateStore:
        return self._world.keystore


class SimEngine(Engine):
    """The real engine over the simulated world; its plan is made from the world as the model
    knows it (the real one reads records), its findings (unfinished runs, a target an earlier
    failover fenced) are the engine's own."""

    def __init__(self, world: SimWorld, role: str) -> None:
        from drkit.failover.lease import LeaseRepository
        from drkit.failover.steps import STEPS

        super().__init__(
            world.config, world.store, world.state_dir, role=role,
            connect=world.clusters.connect,
            steps={**STEPS, StepName.TRANSLATE_OFFSETS: _translate(world),
                   StepName.CAPTURE_DIVERGENT_TAIL: _capture(world),
                   StepName.FOLLOW_STANDBYS: follow_standbys_with(_follow(world))},
            leases=LeaseRepository(world.store), channels=world.channels(),
            run_hook=world.run_hook, registries=world.registries.__getitem__,
            progress_readers=world.progress_reader,
        )  # fmt: skip
        self.world = world

    def plan(self, procedure: Procedure, source: str, target: str, options: RunOptions) -> Plan:
        flow = flow_between(self.config, source, target)
        pointer = self.pointers.get()
        runbook = self.runbook(procedure)
        source_admin = self.world.clusters[source]
        reachable = source_admin.answers()
        topology = FlowTopology.of(flow)
        partitions = sorted(
            (topic, index)
            for topic, info in self.world.clusters[source].topics.items()
            if topology.selects(topic) and topic != "heartbeats"
            for index in range(len(info.partitions))
        )
        rpo = tuple(PartitionRpo(t, p, 0, 0, 0, 0, 0.0) for t, p in partitions)
        plan = Plan(
            procedure=procedure, source=source, target=target, flow=flow.name,
            reverse_flow=f"{target}->{source}", source_reachable=reachable,
            translation_mode="live" if reachable else "checkpoints",
            steps=runbook.planned_steps(), groups=(), groups_without_checkpoint=(),
            rpo=rpo, findings=(), pointer_from=pointer.cluster if pointer else None,
            pointer_to=target,
        )  # fmt: skip
        extra = self._unfinished_findings() + self._fenced_by_failover(procedure, target)
        if procedure is not Procedure.FAILOVER and not reachable:  # the planner's own rule
            extra += (Finding(Severity.BLOCKER, "source_unreachable", f"{source} is away"),)
        if plan.pointer_from not in (None, source, target):  # its rule for a third cluster
            extra += (Finding(Severity.BLOCKER, "pointer_elsewhere", f"{plan.pointer_from} is"),)
        return replace(plan, findings=plan.findings + extra)


def _translate(world: SimWorld) -> Callable[[StepContext, float | None], StepOutcome]:
    """translate_offsets over the model: each group's committed source offset, on the source
    when it answers (else none: nothing to move - the model has no checkpoints), translated by
    drkit.translation over the flow's offset maps as the store's key verifies them
    (:meth:`SimWorld.offset_maps`); a partition it cannot translate is not moved (its
    consumers start at ``auto.offset.reset`` on the target)."""

    def step(ctx: StepContext, _timeout: float | None) -> StepOutcome:
        source, target = world.clusters[ctx.source], world.clusters[ctx.target]
        topology = ctx.topology
        groups = []
        try:
            committed = {g: source.group_offsets(g).offsets for g in GROUPS}
        except KafkaError:
            committed = {}
        maps: dict[TopicPartition, PartitionMapping] = {}
        if committed:
            maps, rejected = world.offset_maps(topology)
            world.sync_reads.append((ctx.run.id, topology.name, rejected, world.keys_lost))
        read: dict[tuple[str, TopicPartition], int] = {}
        for group, offsets in sorted(committed.items()):
            moves = []
            for tp, offset in sorted(offsets.items()):
                if not topology.selects(tp.topic):
                    continue
                read[(group, tp)] = offset
                moves.append(_move(source, target, topology, tp, offset, maps.get(tp)))
            groups.append(GroupTranslation(group, "absent", False, tuple(moves)))
        if committed:
            world.translated[ctx.run.id] = (topology.name, read)
        translation = Translation(ctx.run.plan_head.translation_mode, tuple(groups), (), ())
        return StepOutcome.done(**translation.to_detail())

    return step


def _move(
    source: FakeCluster,
    target: FakeCluster,
    topology: FlowTopology,
    tp: TopicPartition,
    offset: int,
    mapping: PartitionMapping | None,
) -> PartitionMove:
    """Where a group committed at ``offset`` on ``tp`` resumes (drkit.failover.plan's move of
    one partition, over the model's facts)."""
    replica = mapping.target if mapping is not None else topology.target_partition(tp)
    found = target.topics.get(replica.topic)
    bounds = None
    if found is not None and replica.partition < len(found.partitions):
        part = found.partitions[replica.partition]
        bounds = TargetBounds(part.log_start, part.end)
    if mapping is None or bounds is None:
        # Nothing copied from ``tp`` yet (no offset map, no replica): drkit moves nothing and
        # its consumers start on an empty replica partition - the same as the model's move to
        # its start, kept so that the schedules the seeds of regressions.txt and
        # test_mutations.py name stay what they were (a commit is a scheduling point).
        copied = min(offset, mapping.replicated_end or 0) if mapping is not None else 0
        return PartitionMove(
            tp.topic, tp.partition, replica.topic, replica.partition, offset, copied, "exact", 0,
            offset - copied,
        )  # fmt: skip
    origin = source.topics.get(tp.topic)
    source_end = origin.partitions[tp.partition].end if origin is not None else None
    result = translate_partition(tp, offset, mapping, bounds, source_end)
    if isinstance(result, CannotTranslate):
        return PartitionMove(
            tp.topic, tp.partition, replica.topic, replica.partition, offset, None, "none",
            None, None, result.reason,
        )  # fmt: skip
    return PartitionMove(
        tp.topic, tp.partition, result.target.topic, result.target.partition, offset,
        result.target_offset, result.method.value, result.expected_rereads, result.unreplicated,
    )  # fmt: skip


def _capture(world: SimWorld) -> Callable[[StepContext, float | None], StepOutcome]:
    """capture_divergent_tail over the model: the original primary must be fenced first."""

    def step(ctx: StepContext, _timeout: float | None) -> StepOutcome:
        original = world.clusters[ctx.target]
        original._answer("capture tail")
        return StepOutcome.done(records=0, per_partition={})

    return step


def _follow(world: SimWorld) -> Follower:
    """follow_standbys' copy over the model: the step is real (which standbys, held or not,
    reachable or not, the run's lease, the pending commands) - its data copy reads records by
    provenance, which the model does not keep, so it copies nothing.  Both replicas must
    answer, as the copy's reads and writes must (a cluster down mid-copy: the step reports
    the standby pending)."""

    def follow(
        config: object,
        lost: str,
        promoted: str,
        standby: str,
        *,
        connect: object,
        keys: object,
        confirm: object = None,
    ) -> tuple[RepointReport, dict[TopicPartition, Copied]]:
        for alias in (promoted, standby):
            world.clusters[alias]._answer("follow-on copy")
        return RepointReport(lost, promoted, standby, {}, {}), {}

    return follow


# -- the worker: the real gate, a modelled data path -------------------------------------------


class StoreControl:
    """The gate's port on the simulated store (drkit.control.gate.ControlPort)."""

    def __init__(self, world: SimWorld) -> None:
        self.repo = ControlRepository(world.store)

    def directive(self, flow: str, default: DesiredState) -> Any:
        return self.repo.directive(flow, default)

    def ack(
        self,
        flow: str,
        worker: str,
        epoch: int,
        state: DesiredState,
        failure: str | None = None,
    ) -> None:
        self.repo.ack(flow, worker, epoch, state, failure)

    def forget_worker(self, flow: str, worker: str) -> None:
        self.repo.forget_worker(flow, worker)


def worker(world: SimWorld, flow: FlowConfig, worker_id: str) -> None:
    """One replication worker of ``flow``: it obeys its gate (store, channel, self-fencing
    after the silence window) and, while RUNNING, copies a few records a round."""
    gate = FlowGate(
        StoreControl(world), flow.name, worker_id, default_state(flow), SILENCE_S,
        poll_s=0.5, clock=drkit_clock.monotonic,
        channel=FakeChannel(world.clusters[flow.target], flow.name),
    )  # fmt: skip
    topology = FlowTopology.of(flow)
    # The flow's key, read once and kept (derived from the secret; else what the store says
    # now: a fresh key if it lost it).
    signer = world.flow_keys().signer(flow.name, Kind.OFFSET_SYNC)
    while True:
        gate.poll_once()
        decision = gate.wanted()
        if decision.state is DesiredState.RUNNING:
            # A worker retries forever (drkit.replication.supervision).
            with contextlib.suppress(KafkaError, StateStoreError):
                copy_some(world, topology, worker_id, signer)
        gate.acted(decision.epoch, decision.state)
        drkit_clock.sleep(WORKER_ROUND_S)


def copy_some(world: SimWorld, topology: FlowTopology, worker_id: str, signer: Signer) -> None:
    """One round of the data path: every selected source partition's new records (a few at
    a time) appended to its replica as the replicator, their run written to the offset-sync
    topic (signed with the worker's key), then its progress moved."""
    source, target = world.clusters[topology.source], world.clusters[topology.target]
    world.replication.rounds[(topology.name, worker_id)] = world.sim.now
    selected = {
        TopicPartition(topic, index): info
        for topic, info in source.list_topics().items()
        if topology.selects(topic) and topic != "heartbeats"
        for index in range(len(info.partitions))
    }
    ends = source.list_offsets(selected)
    for tp, info in selected.items():
        if world.replication.owner(topology.name, tp, world.sim.now) != worker_id:
            continue
        replica = topology.target_topic(tp.topic)
        if replica not in target.topics:
            target.create_topics([TopicSpec(replica, len(info.partitions))])
        done = world.replication.progress.get((topology.name, tp), 0)
        if ends[tp] <= done:
            continue
        count = min(ends[tp] - done, 1 + world.sim.rng.randrange(4))
        target._answer("produce")
        dst = target.append(replica, tp.partition, count, principal=REPLICATOR) - count
        world.replication.appends.append(
            Append(world.sim.now, topology.name, worker_id, topology.target, replica, count)
        )
        sync = OffsetSync(tp, TopicPartition(replica, tp.partition), OffsetRun(done, dst, count))
        record = sync.key(), sync.value()
        world.replication.syncs.setdefault(topology.name, []).append(
            (*record, (signer.header(*record),))
        )
        key = (topology.name, tp)
        copies = world.replication.copies.setdefault(key, {})
        replica_tp = TopicPartition(replica, tp.partition)
        for index in range(count):
            copies[done + index] = dst + index
            world.replication.records.put(
                replica_tp, dst + index, topology.source, tp, done + index
            )
        world.replication.progress[key] = max(world.replication.progress.get(key, 0), done + count)
