"""Schema registry copies, pure and over in-memory registries: what is missing, what conflicts,
what a copy that skipped something reports, and what a failover's sync_schemas step does when a
registry is gone.  The real registries' behaviour is tested in
tests/integration/test_schemas.py."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.config import load_config_text
from drkit.config.model import SchemaRegistryConfig
from drkit.errors import ConfigError, SchemaRegistryError
from drkit.failover.context import StepContext, StepFailed
from drkit.failover.model import Plan, PlannedStep, Procedure, StepName, StepState
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import RunRepository
from drkit.failover.steps import schemas as schema_step
from drkit.schemas import sync as schema_sync_module
from drkit.schemas.catalogue import SchemaVersion, drift_lines, plan_sync
from drkit.schemas.sync import SchemaSynchronizer
from drkit.store import StateStore
from tests.fake_kafka import FakeClusters


def version(subject: str, number: int, id_: int, schema: str | None = None) -> SchemaVersion:
    return SchemaVersion(subject, number, id_, "AVRO", schema or f'"{subject}-{number}"')


# -- plan_sync --------------------------------------------------------------------------------


def test_what_the_target_lacks_is_missing_and_what_it_holds_is_present() -> None:
    source = [version("orders", 1, 2), version("orders", 2, 3), version("pay", 1, 4)]
    plan = plan_sync(source, [version("orders", 1, 2)])
    assert plan.present == 1 and not plan.conflicts
    assert [v.id for v in plan.missing] == [3, 4] and plan.missing_ids() == (3, 4)
    assert drift_lines(plan, "dc2") == ["2 schema version(s) missing on dc2's registry (ids 3, 4)"]


def test_an_id_that_means_another_schema_on_the_target_is_a_conflict_not_missing() -> None:
    plan = plan_sync([version("orders", 1, 5)], [version("other", 1, 5, '"x"')])
    assert plan.missing == () and plan.present == 0
    assert plan.conflicts == (
        "id 5 is a different schema on the target than orders version 1 on the source",
    )


def test_a_subject_version_under_another_id_on_the_target_is_a_conflict() -> None:
    plan = plan_sync([version("orders", 1, 5)], [version("orders", 1, 7)])
    assert plan.conflicts == ("orders version 1 is id 7 on the target, id 5 on the source",)


def test_one_schema_under_two_subjects_shares_its_id_without_conflict() -> None:
    same = '"shared"'
    plan = plan_sync(
        [version("a", 1, 9, same), version("b", 1, 9, same)], [version("a", 1, 9, same)]
    )
    assert not plan.conflicts and plan.present == 1 and plan.missing_ids() == (9,)


catalogues = st.lists(
    st.builds(
        version,
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 3),
        st.integers(1, 6),
    ),
    unique_by=lambda v: (v.subject, v.version),
)


@given(catalogues)
def test_a_catalogue_copied_onto_itself_or_nothing(source: list[SchemaVersion]) -> None:
    onto_itself = plan_sync(source, source)
    # version() derives the schema from subject and version: two of them under one id are a
    # conflict the source itself holds; otherwise the catalogue is in sync with itself.
    contents = {v.id: {x.content for x in source if x.id == v.id} for v in source}
    if all(len(c) == 1 for c in contents.values()):
        assert onto_itself.in_sync and onto_itself.present == len(source)
        onto_nothing = plan_sync(source, [])
        assert len(onto_nothing.missing) == len(source) and not onto_nothing.conflicts


# -- SchemaSynchronizer over in-memory registries ----------------------------------------------


class MemoryRegistry:
    """A registry as drkit uses one: a catalogue, an export, an import that keeps ids and -
    like Apicurio's - quietly skips an id it already holds (or, ``drops``, others too)."""

    def __init__(self, alias: str, versions: list[SchemaVersion], drops: set[int] | None = None):
        self.alias = alias
        self.versions = list(versions)
        self.drops = drops or set()
        self.imports = 0
        self.modes: list[str] = []
        self.down = False
        self.quick = False  # handed out for one short try per request (a failover's RTO)
        self.gate: threading.Event | None = None

    def catalogue(self) -> tuple[SchemaVersion, ...]:
        if self.gate is not None:
            self.gate.wait(5)  # a slow registry
        if self.down:
            raise SchemaRegistryError(f"schema registry of {self.alias} is unreachable")
        return tuple(self.versions)

    def export_archive(self) -> bytes:
        return json.dumps([dataclasses.astuple(v) for v in self.catalogue()]).encode()

    def import_archive(self, archive: bytes) -> None:
        self.imports += 1
        held = {v.id for v in self.versions}
        for raw in json.loads(archive):
            incoming = SchemaVersion(*raw[:5])
            if incoming.id not in held and incoming.id not in self.drops:
                self.versions.append(incoming)

    def mode(self) -> str | None:
        if self.down:
            raise SchemaRegistryError(f"schema registry of {self.alias} is unreachable")
        return self.modes[-1] if self.modes else "READWRITE"  # a Confluent registry's default

    def set_mode(self, mode: str) -> str:
        if self.down:
            raise SchemaRegistryError(f"schema registry of {self.alias} is unreachable")
        self.modes.append(mode)
        return mode


def sync_of(source: MemoryRegistry, target: MemoryRegistry) -> SchemaSynchronizer:
    return SchemaSynchronizer(source, target)


def test_a_copy_adds_what_is_missing_and_a_second_finds_nothing_to_do() -> None:
    source = MemoryRegistry("dc1", [version("orders", 1, 2), version("orders", 2, 3)])
    target = MemoryRegistry("dc2", [])
    first = sync_of(source, target).sync()
    assert (first.copied, first.present, first.ids) == (2, 0, (2, 3))
    assert plan_sync(source.versions, target.versions).in_sync
    second = sync_of(source, target).sync()
    assert (second.copied, second.present) == (0, 2) and target.imports == 1


def test_a_conflict_copies_nothing_and_names_the_id() -> None:
    source = MemoryRegistry("dc1", [version("orders", 1, 2), version("pay", 1, 3)])
    target = MemoryRegistry("dc2", [version("theirs", 1, 2, '"other"')])
    with pytest.raises(SchemaRegistryError, match=r"copied: id 2 is a different"):
        sync_of(source, target).sync()
    assert target.imports == 0 and [v.subject for v in target.versions] == ["theirs"]


def test_an_import_that_skipped_a_schema_is_an_error_naming_it() -> None:
    source = MemoryRegistry("dc1", [version("orders", 1, 2), version("pay", 1, 3)])
    target = MemoryRegistry("dc2", [], drops={3})
    with pytest.raises(SchemaRegistryError, match=r"still missing on dc2's registry .*ids 3\)"):
        sync_of(source, target).sync()


# -- the failover step ------------------------------------------------------------------------

CONFIG = """
clusters:
  dc1:
    bootstrap_servers: "127.0.0.1:9"
    schema_registry: {url: "http://127.0.0.1:1/apis/ccompat/v7"}
  dc2:
    bootstrap_servers: "127.0.0.1:10"
    schema_registry: {url: "http://127.0.0.1:2/apis/ccompat/v7"}
flows:
  - {source: dc1, target: dc2, schema_sync: {enabled: true}}
"""


def step_context_for(
    tmp_path: Path,
    procedure: Procedure,
    registries: dict[str, MemoryRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> StepContext:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    runs = RunRepository(store)
    plan = Plan(
        procedure=procedure, source="dc1", target="dc2", flow="dc1->dc2", reverse_flow=None,
        source_reachable=False, translation_mode="checkpoints",
        steps=(PlannedStep(1, StepName.SYNC_SCHEMAS, None, None),), groups=(),
        groups_without_checkpoint=(), rpo=(), findings=(), pointer_from="dc1", pointer_to="dc2",
    )  # fmt: skip
    run = runs.create(plan, "test", "unit")
    runs.step_started(run.id, StepName.SYNC_SCHEMAS)  # the intent, as the engine records it

    def registry_of(_config: object, alias: str, quick: bool = False) -> MemoryRegistry:
        registries[alias].quick = quick
        return registries[alias]

    monkeypatch.setattr(schema_sync_module, "registry_of", registry_of)
    return StepContext(
        config, config.flows[0], store, runs, run, RunOptions(), tmp_path,
        connect=FakeClusters("dc1", "dc2").connect,
    )  # fmt: skip


def test_a_failover_with_the_source_registry_gone_goes_on_and_says_what_dc2_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = MemoryRegistry("dc1", [version("orders", 1, 2)])
    source.down = True
    target = MemoryRegistry("dc2", [version("orders", 1, 2)])
    target.modes.append("READONLY")  # the standby's, as an earlier move left it
    ctx = step_context_for(
        tmp_path, Procedure.FAILOVER, {"dc1": source, "dc2": target}, monkeypatch
    )
    outcome = schema_step.sync_schemas(ctx, 30)
    assert outcome.state is StepState.DONE
    assert "unreachable" in outcome.detail["copy"]
    assert outcome.detail["target_versions"] == 1
    assert outcome.detail["target_mode"] == "READWRITE"
    assert target.modes == ["READONLY", "READWRITE"]
    assert outcome.detail["source_mode"].startswith("not set")
    assert source.quick and target.quick  # a dead registry costs one short try, not retries


def test_a_switchover_that_cannot_copy_the_schemas_fails_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = MemoryRegistry("dc1", [version("orders", 1, 2)])
    target = MemoryRegistry("dc2", [version("x", 1, 2, '"x"')])  # a conflict
    ctx = step_context_for(
        tmp_path, Procedure.SWITCHOVER, {"dc1": source, "dc2": target}, monkeypatch
    )
    with pytest.raises(StepFailed, match=r"could not be copied to dc2: .*id 2"):
        schema_step.sync_schemas(ctx, 30)
    assert target.modes == [] and source.modes == []  # nothing switched
    assert not source.quick  # a planned move gives the registries their configured retries


def test_a_flow_without_schema_sync_skips_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = step_context_for(tmp_path, Procedure.FAILOVER, {}, monkeypatch)
    ctx.flow = ctx.flow.model_copy(update={"schema_sync": ctx.flow.schema_sync.model_copy(
        update={"enabled": False})})  # fmt: skip
    assert schema_step.sync_schemas(ctx, 30).state is StepState.SKIPPED


# -- configuration ----------------------------------------------------------------------------


def test_a_registry_url_must_be_apicurios_confluent_compatible_api() -> None:
    with pytest.raises(ValueError, match="ending in /apis/ccompat/v7"):
        SchemaRegistryConfig(url="http://registry:8080/apis/registry/v2")
    config = SchemaRegistryConfig(url="http://registry:8080/apis/ccompat/v7/")
    assert config.url == "http://registry:8080/apis/ccompat/v7"
    assert config.registry_api == "http://registry:8080/apis/registry/v2"


def test_schema_sync_on_a_flow_whose_clusters_have_no_registry_is_a_config_error() -> None:
    text = CONFIG.replace('    schema_registry: {url: "http://127.0.0.1:2/apis/ccompat/v7"}\n', "")
    with pytest.raises(ConfigError, match=r"flows\[0\].schema_sync: cluster 'dc2' has no"):
        load_config_text(text, env={})


# -- the worker's side-sync thread -------------------------------------------------------------


def test_a_failing_side_sync_is_counted_and_retried_and_ends_when_told() -> None:

    from prometheus_client import CollectorRegistry

    from drkit.replication.background import SideSync, side_sync_loop
    from drkit.replication.metrics import ReplicationMetrics

    metrics = ReplicationMetrics.create(CollectorRegistry())
    quit_ = threading.Event()
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 3:
            quit_.set()
        raise SchemaRegistryError("schema registry of dc1 is unreachable")

    side_sync_loop(SideSync("schema_sync", 0.01, flaky), "dc1->dc2", metrics, quit_)
    assert len(calls) == 3  # failures never ended the loop; the quit did
    assert metrics.errors.labels("dc1->dc2", "schema_sync")._value.get() == 3
    success = metrics.side_sync_success.labels("dc1->dc2", "schema_sync")
    assert success._value.get() == 0  # never succeeded: no time to show
    calls.clear()
    quit_.clear()
    side_sync_loop(SideSync("schema_sync", 0.01, quit_.set), "dc1->dc2", metrics, quit_)
    assert success._value.get() > 0


# -- the plan: what the target's registry will hold -------------------------------------------


def _plan_codes(procedure: Procedure, facts: object) -> dict[str, str]:
    from drkit.failover.plan import make_plan
    from drkit.failover.runbook import load_runbook
    from tests.unit.test_failover_plan import _snapshot

    snapshot = _snapshot(procedure, schemas=facts)
    plan = make_plan(snapshot, load_runbook(procedure))
    return {f.code: f.severity.value for f in plan.findings if "schema" in f.code}


def test_a_planned_move_is_blocked_by_what_would_fail_its_schema_step() -> None:
    from drkit.failover.facts import SchemaFacts

    down = SchemaFacts((), 0, (), "schema registry of dc1 at http://r1 is unreachable")
    clash = SchemaFacts((), 0, ("id 4 is a different schema on the target than a version 1",), None)
    behind = SchemaFacts((7, 8), 2, (), None)
    assert _plan_codes(Procedure.SWITCHOVER, down) == {"schemas_unknown": "blocker"}
    assert _plan_codes(Procedure.CUTOVER, clash) == {"schema_conflicts": "blocker"}
    # Missing versions are the step's work, not a reason to stop.
    assert _plan_codes(Procedure.SWITCHOVER, behind) == {"schemas_missing": "warning"}
    # An unplanned failover goes on with what the target holds: warnings only.
    assert _plan_codes(Procedure.FAILOVER, down) == {"schemas_unknown": "warning"}
    assert _plan_codes(Procedure.FAILOVER, clash) == {"schema_conflicts": "warning"}
    assert _plan_codes(Procedure.FAILOVER, None) == {}


# -- drkit status: the drift, compared in the background ---------------------------------------


def test_schema_drift_is_unknown_until_compared_then_names_what_is_missing() -> None:
    import time

    from drkit.schemas.sync import SchemaDriftWatch

    source = MemoryRegistry("dc1", [version("orders", 1, 2), version("orders", 2, 3)])
    target = MemoryRegistry("dc2", [version("orders", 1, 2)])
    source.gate = threading.Event()
    watch = SchemaDriftWatch(sync_of(source, target))
    # The registry is slow: the caller (the probe) gets an answer at once, and it is unknown.
    assert watch.lines() == ["schemas on dc2: unknown (not compared yet)"]
    source.gate.set()
    deadline = time.monotonic() + 5
    while watch.lines() == ["schemas on dc2: unknown (not compared yet)"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert watch.lines() == ["1 schema version(s) missing on dc2's registry (ids 3)"]
    source.down = True  # a registry that stops answering is unknown, not "no drift"
    while "unknown" not in watch.lines()[0]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert watch.lines() == ["schemas on dc2: unknown (schema registry of dc1 is unreachable)"]


def test_a_paused_flow_syncs_nothing_until_it_runs_again() -> None:
    from prometheus_client import CollectorRegistry

    from drkit.replication.background import SideSync, side_sync_loop
    from drkit.replication.metrics import ReplicationMetrics

    quit_ = threading.Event()
    checks: list[bool] = []
    calls: list[int] = []

    def active() -> bool:
        checks.append(len(checks) >= 2)  # resumed after two paused rounds
        return checks[-1]

    def sync() -> None:
        calls.append(len(checks))
        quit_.set()

    metrics = ReplicationMetrics.create(CollectorRegistry())
    side_sync_loop(SideSync("schema_sync", 0.01, sync), "dc2->dc1", metrics, quit_, active)
    assert checks == [False, False, True] and calls == [3]


# -- a url that is not a registry --------------------------------------------------------------


def test_a_server_that_is_not_a_registry_is_a_clear_error_not_a_traceback() -> None:
    import http.server

    from drkit.schemas.registry import SchemaRegistry

    class NotARegistry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status": "ok"}'  # a health endpoint, say
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotARegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/apis/ccompat/v7"
        registry = SchemaRegistry("dc1", SchemaRegistryConfig(url=url))
        with pytest.raises(SchemaRegistryError, match="not the Confluent-compatible API"):
            registry.catalogue()
    finally:
        server.shutdown()
