"""The shipped three-data-center drill runs to a PolicyMet report on real brokers, and its
figures match a recount this test makes on its own from the records (issue 48).

The source is a throw-away local cluster (``scratch``: the drill kills it); the target is the
shared ``dc2`` and the other standby the shared ``dc1`` (the role dc3 plays in the scenario),
as tests/integration/test_three_clusters.py arranges three clusters.  The recount does not use
the drill's code: it decodes every record's ``drkit-src`` (origin offset) and ``drkit-origin``
(the cluster drkit wrote this copy to) by hand on both replicas - the follow-on's copies are the
standby's records that say they were written to the promoted cluster, since it copies every
header as it is there.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from drkit.config import load_config
from drkit.drills.environment import DrillEnvironment, remove_drill_data
from drkit.drills.report import DrillReport, Verdict
from drkit.drills.scenario import Standby, load_scenario
from drkit.drills.service import run_drill
from drkit.errors import ConfigError
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.io import consume_all
from drkit.store import StateStore
from tests.kafka_backends import ClusterUnderTest, backend

SCENARIO = "three-dc-loss-of-dc1"


def _base(tmp_path: Path, *clusters: ClusterUnderTest) -> Path:
    path = tmp_path / "drkit.yaml"
    document = {
        "clusters": {c.name: {"bootstrap_servers": c.bootstrap_servers} for c in clusters},
        "flows": [],
        "state_store": {"url": f"sqlite:///{tmp_path / 'main.db'}"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def _copies(cluster: ClusterUnderTest, topic: str) -> dict[tuple[str, int], list[tuple[int, str]]]:
    """Per origin (topic, partition): (origin offset, cluster id this copy was written to) of
    every committed record of ``topic`` on ``cluster``, decoded from its headers by hand."""
    endpoint = ClusterEndpoint.plain(cluster.name, cluster.bootstrap_servers)
    out: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for record in consume_all(endpoint, topic, timeout_s=60, complete=True):
        src, origin = record.header("drkit-src"), record.header("drkit-origin")
        assert src is not None and origin is not None, record
        origin_topic, partition, offset = src.decode().split("/")[1:]
        written_to = origin.decode().split("/")[1]
        out[(origin_topic, int(partition))].append((int(offset), written_to))
    return out


def test_the_three_dc_drill_meets_its_policy_and_its_figures_match_a_recount(
    scratch: ClusterUnderTest, dc1: ClusterUnderTest, dc2: ClusterUnderTest, tmp_path: Path
) -> None:
    if backend() != "local":
        pytest.skip("drills inject faults into local clusters: DRKIT_TEST_KAFKA=local")
    shipped = load_scenario(SCENARIO)
    lag = shipped.standbys[0].stopped_before_fault_s
    scenario = shipped.model_copy(
        update={
            "source": scratch.name,
            "target": dc2.name,
            "standbys": (Standby(cluster=dc1.name, stopped_before_fault_s=lag),),
        }
    )
    store = StateStore(f"sqlite:///{tmp_path / 'main.db'}")
    store.ensure_current()
    assert scratch.local is not None

    # Without the third cluster in the config: refused, naming it, before anything is touched.
    (tmp_path / "two").mkdir()
    two = _base(tmp_path / "two", scratch, dc2)
    with pytest.raises(ConfigError, match=f"names {dc1.name}, not a cluster of"):
        run_drill(scenario, load_config(two), two, store, tmp_path / "state",
                  verify=False, local=scratch.local, connect=KafkaAdmin)  # fmt: skip

    config_path = _base(tmp_path, scratch, dc2, dc1)
    outcome = run_drill(
        scenario,
        load_config(config_path),
        config_path,
        store,
        tmp_path / "state",
        verify=False,
        local=scratch.local,
        keep=True,  # recounted below
        connect=KafkaAdmin,
    )
    report = outcome.report
    document = json.loads(outcome.json.read_text())
    assert DrillReport.from_json(document) == report
    assert report.verdict is Verdict.POLICY_MET, (report.reasons, report.notes)
    assert all(c.passed for c in report.checks), report.checks
    names = [c.name for c in report.checks]
    for check in ("standby_chosen", "standby_has_every_record", "standby_each_once",
                  "repoint_counted"):  # fmt: skip
        assert check in names

    # The choice: dc2 (younger evidence), with both candidates' figures.
    assert report.standbys is not None
    choice = report.standbys.choice
    assert (choice.decision, choice.chosen, choice.promoted) == ("manual", dc2.name, dc2.name)
    outcomes = {c["cluster"]: c["outcome"] for c in choice.candidates}
    assert outcomes == {dc2.name: "chosen", dc1.name: "lost"}
    assert all(c["rpo_s"] is not None for c in choice.candidates)

    # RTO as in the two-cluster drills; the re-point after the recovery, its time apart.
    assert report.rto is not None and report.rto.detection_s > 0 and report.rto.execution_s > 0
    kinds = {e.kind: e.at_s for e in report.timeline}
    assert kinds["standby_stopped"] < kinds["fault_injected"]
    assert kinds["clients_resumed"] <= kinds["repoint_started"] <= kinds["repoint_finished"]
    (other,) = report.standbys.others
    assert other.cluster == dc1.name and other.error is None
    assert other.repoint_s is not None and other.repoint_s > 0
    # The failover run re-pointed it (its follow_standbys step): the drill's re-point after the
    # clients resumed - what `drkit flows repoint` runs - finds nothing left to copy.
    assert other.total("copied") == 0 and other.total("to_copy") == 0
    assert report.failover_run is not None
    steps = {s["name"]: s["state"] for s in report.failover_run["steps"]}
    assert steps["hold_standby_flows"] == steps["follow_standbys"] == "done", steps
    assert "re-pointed onto" in document["summary"]
    assert 'id="standbys"' in outcome.html.read_text()

    # The independent recount, by origin offset, on both replicas.
    drill_dir = outcome.html.parent
    config = load_config(drill_dir / "drkit.yaml")
    prefix = config.flows[0].topics.include[0].split("\\")[0]  # drillTAG
    replica = f"{config.flows[0].source}.{prefix}.orders"
    try:
        promoted, standby = _copies(dc2, replica), _copies(dc1, replica)
        promoted_id = {w for copies in promoted.values() for _, w in copies}
        assert len(promoted_id) == 1  # every copy on dc2 was written there by its own flow
        for p in other.partitions:
            origin = (f"{prefix}.{p.topic}", p.partition)
            theirs = {offset for offset, _ in promoted[origin]}
            ours = Counter(offset for offset, _ in standby[origin])
            follow_on = [offset for offset, w in standby[origin] if w in promoted_id]
            assert set(ours) >= theirs, "the standby lacks a record the promoted cluster holds"
            assert max(ours.values()) == 1, "an origin offset twice on the standby"
            assert (p.promoted_holds, p.standby_holds) == (len(theirs), len(ours))
            assert (p.missing, p.duplicated) == (0, 0)
            assert p.outcome == "follow" and p.copied == p.to_copy == 0
            assert follow_on, "it lagged: the run's follow-on copied what dc2 had more"
            assert (p.holes, p.unreachable, p.ahead) == (0, 0, 0)
    finally:
        env = DrillEnvironment(drill_dir.name, drill_dir, drill_dir / "drkit.yaml", config,
                               StateStore(f"sqlite:///{drill_dir / 'drill.db'}"))  # fmt: skip
        remove_drill_data(env, KafkaAdmin)
