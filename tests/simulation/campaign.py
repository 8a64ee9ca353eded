"""Seeded schedules: a workload of moves, ticks, workers and applications, with kills, freezes
and a world that fails, over the simulated world - invariants checked after every event.

``run_schedule(seed)`` is one schedule; the same seed gives the same schedule (its trace).  A
schedule runs ``Profile.events`` events - each either one thread going on to its next point,
a fault (a process killed or frozen), a change of the world (a cluster or the store away and
back, a topic created, time jumping) or an operator's action (a move, ``--resume``,
``abandon``, ``fences lift --even-if-standby``) - then a quiet phase: faults stop, the world
comes back, the monitor's maintenance finishes what is left, and the end state is checked;
last, every control-plane process ended, the maintenance runs once more and the protections
must be what the pointer implies (``Checker.converged``).

The world's clusters are a topology's (world.TOPOLOGIES): the default two-dc (dc1 -> dc2), or
three-dc (dc1 -> dc2 and dc1 -> dc3), where a move goes from the primary to one of the
clusters it replicates to (a draw only when there are several: two-dc schedules draw what
they drew) and a failback returns where the failover came from.

Beside them, on a random stream of its own (so a schedule's other choices stay what they
were), the state store now and then loses its flow keys (restored from a backup or migrated
without them: :meth:`SimWorld.lose_flow_keys`) - in about one schedule in ten.  About one
schedule in four (:func:`has_secret`, from the seed alone) runs with ``signing.secret`` in its
config: the flows' offset-sync keys are derived from it, and the store losing its keys loses
none - there it happens four times as often (it changes nothing else in such a schedule).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from drkit.config.model import FlowConfig
from drkit.errors import DrkitError
from drkit.failover.fences import FenceRepository
from drkit.failover.lease import LeaseRepository
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.model import Procedure, RunState
from drkit.failover.pointer import PointerRepository
from drkit.failover.reconcile import Reconciler
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import RunRecord, RunRepository
from drkit.failover.unfence import LiftFacts, lift_blockers
from drkit.kafka.admin import TopicSpec
from drkit.records import TopicPartition
from tests.simulation.invariants import Checker, Violation
from tests.simulation.scheduler import Killed, Sim, SimProcess, SimThread, Stuck
from tests.simulation.world import (
    APP,
    GROUPS,
    LEASE_TTL_S,
    TOPICS,
    TOPOLOGIES,
    TWO_DC,
    WORKERS_PER_FLOW,
    SimWorld,
    Template,
    worker,
)

TICK_S = 5.0  # the monitor's maintenance tick
BUGGIFY_RATE = 0.1  # an engine dies at a step's edge this often
# Where a step's edge is: its outcome recorded, its hooks run (``file:function`` frames).
QUIET_BUGGIFY = 2  # the quiet phase's runs finish too (a move is slow beside the workload)
_STEP_EDGES = frozenset({"runs.py:step_finished", "runs.py:record_detail", "engine.py:_run_hooks"})
CONVERGE_S = 120.0  # simulated seconds the last maintenance pass may take (with what ends first)
QUIET_EVENTS = 20_000  # the quiet phase ends in simulated time long before this
KEYS_LOST_RATE = 0.0004  # per event before the quiet phase: about one schedule in ten
SECRET_SHARE = 0.25  # of the schedules, those with signing.secret configured
SECRET_KEYS_LOST = 4  # ... where the store loses its keys this many times as often


def has_secret(seed: int) -> bool:
    """Whether the schedule of ``seed`` runs with ``signing.secret`` configured: a stream of
    its own (the schedule's other choices stay what they were), spread over the test shards;
    its offset picked so that no seed of regressions.txt or test_mutations.py has one (their
    schedules stay what they were - 202's needs the store's own keys)."""
    return random.Random(seed * 15485863 + 50).random() < SECRET_SHARE


@dataclass(frozen=True)
class Profile:
    events: int = 300
    fault_rate: float = 0.006
    world_rate: float = 0.008
    operator_rate: float = 0.02
    app_rate: float = 0.06
    quiet_s: float = 240.0  # simulated seconds the quiet phase may take


@dataclass
class Outcome:
    seed: int
    violations: list[Violation]
    trace: list[str]
    runs: int
    events: int
    real_s: float
    error: str | None = None
    topology: str = TWO_DC.name
    known_gaps: int = 0  # moves exempted as invariants.NOT_REPOINTED (three clusters)

    @property
    def ok(self) -> bool:
        return not self.violations and self.error is None

    def replay(self) -> str:
        chosen = "" if self.topology == TWO_DC.name else f" --topology {self.topology}"
        return f"PYTHONHASHSEED=0 python -m tests.simulation --seed {self.seed}{chosen} --trace"


def run_schedule(
    seed: int,
    template: Template,
    profile: Profile | None = None,
    journal: bool = False,
    topology: str = TWO_DC.name,
) -> Outcome:
    """One schedule; ``journal``: the trace also says what changed in the store and which
    topics each cluster lets applications write (slower; for replays); ``topology``: the
    world's clusters and flows (world.TOPOLOGIES - a seed's schedule is its own in each)."""
    started = time.monotonic()
    sim = Sim(seed)
    world = SimWorld(sim, template, secret=has_secret(seed), topology=TOPOLOGIES[topology])
    checker = Checker(world, journal=journal)
    driver = Driver(sim, world, checker, profile or Profile())
    driver.buggify_rng.seed(seed * 7919 + 1)
    driver.keys_rng.seed(seed * 104729 + 3)
    error = None
    try:
        driver.run()
    except Stuck as stuck:
        error = f"stuck: {stuck}"
    finally:
        sim.finish()
        world.close()
    return Outcome(
        seed, checker.violations, sim.trace, driver.runs, driver.events,
        time.monotonic() - started, error, topology, checker.known_gaps,
    )  # fmt: skip


@dataclass
class Driver:
    sim: Sim
    world: SimWorld
    checker: Checker
    profile: Profile
    runs: int = 0
    events: int = 0
    next_tick: float = 0.0
    workers: dict[tuple[str, int], SimProcess] = field(default_factory=dict)
    worker_generation: int = 0
    topics_created: int = 0
    quiet: bool = False
    buggify_rng: random.Random = field(default_factory=random.Random)
    quiet_buggified: int = 0
    keys_rng: random.Random = field(default_factory=random.Random)
    _workers_checked: int = -1  # Sim.changes when every worker was last found alive
    _busy_at: tuple[int, bool] = (-1, False)  # Sim.changes, _busy() then

    @property
    def rng(self) -> random.Random:
        return self.sim.rng

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        self._spawn("setup", self._setup_body)
        self._drain_setup()
        for _ in range(self.profile.events):
            self.event()
            if self.checker.violations:
                return
        self.quiet = True
        self._bring_back()
        deadline = self.sim.now + self.profile.quiet_s
        budget = self.events + QUIET_EVENTS
        while self.sim.now < deadline:
            self.event()
            if self.checker.violations or self._at_rest():
                break
            if self.events > budget:  # simulated time stands still: something spins
                spinning = sorted({t.label for t in self.sim.runnable()})
                self.checker.fail("progress", f"time stands still; runnable at {spinning}")
                return
        if not self.checker.violations:
            self.checker.at_rest()
        if not self.checker.violations:
            self._converge()

    def _converge(self) -> None:
        """The monitor's maintenance once more, to its end, with nothing in its way - every
        control-plane process that is still alive ended first, the lease of a killed one
        lapsed - then the protections checked against the pointer (invariants.Checker's
        ``converged``).  Threads go on in the order the scheduler lists them (no draw: the
        schedule's random stream is left as it was)."""
        control = ("engine", "resume", "maintenance", "operator")
        deadline = self.sim.now + CONVERGE_S
        self.sim.log("converge: the control plane's processes end")
        while any(p.alive and p.kind in control for p in self.sim.live):
            if not self._step_first(deadline):
                return
        self.sim.advance(self.sim.now + LEASE_TTL_S + 1)
        tick = self._spawn("maintenance", self._maintenance_body)
        while tick.alive:
            if not self._step_first(deadline):
                return
        if not self.checker.violations:
            self.checker.converged()

    def _step_first(self, deadline: float) -> bool:
        """One thread on (the first runnable one), or time on; False - recorded - once
        ``deadline`` has passed."""
        if self.sim.now > deadline:
            alive = sorted(p.name for p in self.sim.live if p.alive)
            self.checker.fail("protections converge", f"no quiet end: alive at {alive}")
            return False
        runnable = self.sim.runnable()
        if runnable:
            self.sim.step(runnable[0])
        else:
            waits = self.sim.waiting()
            self.sim.advance(min(waits) if waits else self.sim.now + 0.5)
        self._reap()
        self.checker.after_event()
        return not self.checker.violations

    def _drain_setup(self) -> None:
        while any(p.alive for p in self.sim.live):
            self._step_some()

    def event(self) -> None:
        self.events += 1
        self._background()
        lost_rate = KEYS_LOST_RATE * (SECRET_KEYS_LOST if self.world.secret else 1)
        if not self.quiet and self.keys_rng.random() < lost_rate:
            self.world.lose_flow_keys()
        roll = self.rng.random()
        if self._busy():
            roll /= 3  # during a move: three times the faults, the trouble and the traffic
        p = self.profile
        if not self.quiet and roll < p.fault_rate:
            self._fault()
        elif not self.quiet and roll < p.fault_rate + p.world_rate:
            self._world_event()
        elif roll < p.fault_rate + p.world_rate + p.operator_rate:
            self._operator()
        elif roll < p.fault_rate + p.world_rate + p.operator_rate + p.app_rate:
            self._application()
        else:
            self._step_some()
        self._reap()
        self.checker.after_event()

    def _step_some(self) -> None:
        runnable = self.sim.runnable()
        if not runnable:
            waits = self.sim.waiting()
            self.sim.advance(min(waits) if waits else self.sim.now + 0.5)
            return
        thread = self.rng.choice(runnable)
        self.sim.step(thread)
        self._buggify(thread)

    def _buggify(self, thread: SimThread) -> None:
        """FoundationDB's BUGGIFY: an engine that just committed a step's record, changed a
        cluster or is about to run a hook dies there now and then - the windows a crash finds
        what is half-done are a few points wide, too narrow for the random faults alone.  Its
        own random stream, so a schedule's other choices stay what they were."""
        process = thread.process
        if thread.done or process.kind not in ("engine", "resume"):
            return
        if self.quiet and self.quiet_buggified >= QUIET_BUGGIFY:
            return
        if not _after_a_change(process) or not _STEP_EDGES.intersection(thread.stack):
            return
        if self.buggify_rng.random() >= BUGGIFY_RATE:
            return
        self.quiet_buggified += self.quiet
        self.checker.killed(process.name)
        self.sim.kill(process)

    def _at_rest(self) -> bool:
        view = self.checker.view()
        engines = [p for p in self.sim.live if p.kind in ("engine", "resume") and p.alive]
        return not view.unfinished and not engines and self.sim.now >= self.next_tick

    # -- the background: the monitor's ticks, workers ---------------------------------------

    def _background(self) -> None:
        if self.sim.now >= self.next_tick:
            self.next_tick = self.sim.now + TICK_S
            if not any(p.kind == "maintenance" and p.alive for p in self.sim.live):
                self._spawn("maintenance", self._maintenance_body)
        if self._workers_checked == self.sim.changes:
            return  # no process killed or ended since: every worker is still alive
        for flow in self.world.config.flows:
            for slot in range(WORKERS_PER_FLOW):
                current = self.workers.get((flow.name, slot))
                if current is not None and current.alive:
                    continue
                if current is not None and current.error is not None:
                    self._crashed(current)
                self.worker_generation += 1
                worker_id = f"w{self.worker_generation}"
                body = self._worker_body(flow, worker_id)
                self.workers[(flow.name, slot)] = self._spawn("worker", body)
        self._workers_checked = self.sim.changes

    def _worker_body(self, flow: FlowConfig, worker_id: str) -> Callable[[], object]:
        def body() -> None:
            worker(self.world, flow, worker_id)

        return body

    def _setup_body(self) -> None:
        """The monitor's first pass: the standby's replicas guarded before anything runs."""
        leases = LeaseRepository(self.world.store)
        FailoverMaintenance(
            self.world.config, self.world.store, self.world.state_dir,
            connect=self.world.clusters.connect, registries=self.world.registries.__getitem__,
            leases=leases, engine=lambda: self.world.engine("maintenance"),
        ).tick()  # fmt: skip

    def _maintenance_body(self) -> None:
        self._setup_body()

    # -- faults and the world -------------------------------------------------------------

    def _busy(self) -> bool:
        """Whether a move is under way (faults and trouble are worth more then); redone only
        when a process started, was killed or ended."""
        if self._busy_at[0] != self.sim.changes:
            busy = any(p.kind in ("engine", "resume") and p.alive for p in self.sim.live)
            self._busy_at = (self.sim.changes, busy)
        return self._busy_at[1]

    def _fault(self) -> None:
        victims = [
            p for p in self.sim.live
            if p.alive and p.kind in ("engine", "resume", "maintenance", "worker", "operator")
        ]  # fmt: skip
        if not victims:
            return
        # Like FoundationDB's "buggify": a process that just changed something (a store commit,
        # a cluster change, a hook) is where a fault finds what is half-done - weigh it more.
        weights = [4 if _after_a_change(p) else 1 for p in victims]
        victim = self.rng.choices(victims, weights)[0]
        if self.rng.random() < 0.5:
            self.checker.killed(victim.name)
            self.sim.kill(victim)
        else:
            self.sim.freeze(victim, self.rng.choice((1.0, 4.0, 8.0, 20.0, 45.0)))

    def _world_event(self) -> None:
        kind = self.rng.choice(("cluster", "cluster", "store", "registry", "topic", "jump"))
        if kind == "cluster":
            alias = self.rng.choice(self.world.aliases)
            cluster = self.world.clusters[alias]
            if cluster.up:
                cluster.go_down()
                self.sim.log(f"{alias} DOWN")
            else:
                cluster.come_back()
                self.checker.came_back(alias)
                self.sim.log(f"{alias} back")
        elif kind == "store":
            self.world.store.down_until = self.sim.now + self.rng.choice((1.0, 5.0, 15.0))
            self.sim.log("store DOWN")
        elif kind == "registry":
            registry = self.world.registries[self.rng.choice(self.world.aliases)]
            registry.down = not registry.down
        elif kind == "topic":
            primary = self._primary()
            cluster = self.world.clusters[primary]
            if cluster.up:
                self.topics_created += 1
                name = f"orders.n{self.topics_created}"
                cluster.create_topics([TopicSpec(name, 1)])
                self.sim.log(f"topic {name} created on {primary}")
        else:
            self.sim.advance(self.sim.now + self.rng.choice((2.0, 7.0, 30.0)))
            self.sim.log("time jumps")

    def _bring_back(self) -> None:
        for alias in self.world.aliases:
            if not self.world.clusters[alias].up:
                self.world.clusters[alias].come_back()
                self.checker.came_back(alias)
        for registry in self.world.registries.values():
            registry.down = False
        self.world.store.down_until = -1.0
        self.sim.log("quiet: everything back")

    # -- applications ------------------------------------------------------------------------

    def _primary(self) -> str:
        pointer = self.checker.view().pointer
        return pointer or "dc1"

    def _application(self) -> None:
        """An application writes (to the primary; now and then a stale one elsewhere, or a
        super user whom no ACL stops), or a consumer commits its position on the primary.
        With a topology whose applications create their topics (three-dc), a primary that
        holds none of its own gets them first - the writes a former standby acknowledges
        while it is the primary, which a later move must carry (invariants: from a former
        primary)."""
        alias = self._primary()
        if self.world.topology.apps_create_topics:
            self._create_app_topics(alias)
        if not self.quiet and self.rng.random() < 0.03:
            self._super_write(alias)
            return
        if self.rng.random() < 0.2:
            alias = self.rng.choice(self.world.aliases)
        cluster = self.world.clusters[alias]
        if not cluster.up:
            return
        topics = [t for t in cluster.topics if t.startswith("orders.")]
        if not topics:
            return
        topic = self.rng.choice(sorted(topics))
        partitions = len(cluster.topics[topic].partitions)
        index = self.rng.randrange(partitions)
        if self.rng.random() < 0.7:
            with contextlib.suppress(DrkitError):  # refused: fenced or guarded
                cluster.append(topic, index, 1, principal=APP)
            return
        if alias != self._primary():
            return
        group = self.rng.choice(GROUPS)
        tp = TopicPartition(topic, index)
        now = cluster.committed(group).get(tp, 0)
        end = cluster.topics[topic].partitions[index].end
        if end > now:
            found = cluster.groups.get(group)
            if found is None or found.members == 0:
                cluster.set_group_offsets(group, {tp: now + self.rng.randrange(1, end - now + 1)})

    def _create_app_topics(self, alias: str) -> None:
        """The applications' topics created on ``alias``, the primary, where it has none of
        its own (``auto.create.topics.enable``; no draw)."""
        cluster = self.world.clusters[alias]
        if cluster.up and not any(t.startswith("orders.") for t in cluster.topics):
            cluster.create_topics([TopicSpec(topic, 2) for topic in TOPICS])
            self.sim.log(f"applications create {', '.join(TOPICS)} on {alias}")

    def _super_write(self, alias: str) -> None:
        """A super user writes to the primary (during a move: past the fence - confirm_fence
        must count it and roll the move back)."""
        cluster = self.world.clusters[alias]
        topics = sorted(t for t in cluster.topics if t.startswith("orders."))
        if not cluster.up or not topics:
            return
        topic = self.rng.choice(topics)
        cluster.append(topic, 0, 1, super_user=True)
        key = (alias, TopicPartition(topic, 0))
        self.world.super_writes[key] = self.world.super_writes.get(key, 0) + 1
        self.sim.log(f"super user writes {topic}[0] on {alias}")

    # -- operators --------------------------------------------------------------------------

    def _operator(self) -> None:
        view = self.checker.view()
        engines = [p for p in self.sim.live if p.kind in ("engine", "resume") and p.alive]
        if view.unfinished:
            if engines:
                return
            run = view.unfinished[0]
            if self.rng.random() < 0.8:
                self._spawn("resume", lambda: self.world.engine().resume(run))
            else:
                self._spawn("operator", lambda: self.world.engine().abandon(run, "sim", "sim"))
            return
        if engines and self.rng.random() < 0.7:
            return  # a second engine now and then: the lease lets one through
        if not self.quiet and self.rng.random() < 0.05:
            self._spawn("operator", self._lift_body)
            return
        if self.quiet:
            return
        primary = self._primary()
        procedure, last = self._procedure(primary)
        source, target = primary, self._target(primary, procedure, last)
        self.runs += 1
        self._spawn(
            "engine",
            lambda: self._move(procedure, source, target),
            name=f"engine#{self.runs}-{procedure.value}-{source}-{target}",
        )

    def _procedure(self, primary: str) -> tuple[Procedure, RunRecord | None]:
        """The move an operator starts from ``primary`` (and the last run that succeeded): a
        failback after a failover onto it, else a switchover or a failover; only a failover
        when ``primary`` is away."""
        last = None
        runs = RunRepository(self.world.reader).latest(5)
        for run in runs:
            if run.state is RunState.SUCCEEDED:
                last = run
                break
        choices = [Procedure.SWITCHOVER, Procedure.SWITCHOVER, Procedure.FAILOVER]
        if last is not None and last.procedure is Procedure.FAILOVER and last.target == primary:
            choices = [Procedure.FAILBACK, Procedure.FAILBACK, Procedure.FAILOVER]
        if not self.world.clusters[primary].up:
            choices = [Procedure.FAILOVER]
        chosen: Procedure = self.rng.choice(choices)
        return chosen, last

    def _target(self, primary: str, procedure: Procedure, last: RunRecord | None) -> str:
        """Where the move goes: the one cluster ``primary`` replicates to (two clusters; a
        standby back to dc1) - else a failback returns to where the failover onto ``primary``
        came from, and another move picks one of its targets (a draw only then: the two-cluster
        schedules draw what they drew)."""
        targets = self.world.targets_of(primary)
        if len(targets) == 1:
            return targets[0]
        if procedure is Procedure.FAILBACK and last is not None and last.source in targets:
            return last.source
        chosen: str = self.rng.choice(targets)
        return chosen

    def _move(self, procedure: Procedure, source: str, target: str) -> object:
        engine = self.world.engine()
        options = RunOptions(skip_verify=True)
        plan = engine.plan(procedure, source, target, options)
        return engine.start(plan, options, requested_by="sim")

    def _lift_body(self) -> None:
        """``drkit fences lift --cluster X --even-if-standby``, as the CLI does it."""
        store = self.world.store
        leases = LeaseRepository(store)
        from drkit.failover.lease import LeaseKeeper, unique_owner

        lease = leases.acquire(unique_owner("operator"), 15.0)
        keeper = LeaseKeeper(leases, lease, 15.0)
        try:
            pointer = PointerRepository(store).get()
            alias = self.rng.choice(
                [a for a in self.world.aliases if pointer is None or a != pointer.cluster]
            )
            fences = FenceRepository(store, keeper)
            facts = LiftFacts(
                alias, pointer.cluster if pointer else "dc1", frozenset(fences.fenced(alias)),
                frozenset(), tuple(r.id for r in RunRepository(store).unfinished()), True,
            )  # fmt: skip
            if lift_blockers(facts) or not facts.topics:
                return
            fences.open(alias, pointer.epoch if pointer else 0, "sim", "retiring", None)
            Reconciler(
                self.world.config, store, self.world.clusters.connect, keeper.confirm, keeper,
                self.world.registries.__getitem__,
            ).reconcile([alias], strict=[alias])  # fmt: skip
        finally:
            leases.release(keeper.lease)

    # -- processes --------------------------------------------------------------------------

    def _spawn(self, kind: str, body: Callable[[], object], name: str | None = None) -> SimProcess:
        return self.sim.spawn(kind, body, name)

    def _reap(self) -> None:
        """Judge each process that ended since the last event (each once)."""
        for process in self.sim.take_ended():
            self._crashed(process)

    def _crashed(self, process: SimProcess) -> None:
        error = process.error
        if error is None or isinstance(error, DrkitError | Killed):
            if error is not None:
                self.sim.log(f"{process.name} ended: {type(error).__name__}: {error}")
            return
        self.checker.fail("no crash", f"{process.name}: {type(error).__name__}: {error}")


def _after_a_change(process: SimProcess) -> bool:
    labels = [t.label for t in process.threads if not t.done]
    return any(label.endswith(("committed", "applied")) or "hook" in label for label in labels)


def default_seeds() -> int:
    return int(os.environ.get("DRKIT_SIM_SEED_BASE", "0"))
