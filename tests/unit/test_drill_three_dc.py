"""Drills with standbys besides the target (three data centers, issue 48): the scenario's
``standbys``, the drill config's flows to them, the recount of a re-pointed standby from the
records' ``drkit-src`` provenance, and each check - passing on a right outcome and failing on a
deliberately broken one (a record twice on dc3, one missing, another standby chosen, a count
that does not add up, a re-point that did not run).  Pure, but for the drill config written to
a temporary directory."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from drkit.automation.journal import StoredDecision
from drkit.cli import cli
from drkit.cli.drill_cmd import _report_text
from drkit.drills.environment import DrillEnvironment
from drkit.drills.html import render_report
from drkit.drills.repointing import automatic_choice, manual_choice
from drkit.drills.report import (
    DrillReport,
    RepointedStandby,
    StandbyChosen,
    StandbyPartition,
    Standbys,
)
from drkit.drills.scenario import Scenario, load_scenario, require_clusters
from drkit.drills.standbys import (
    each_once,
    has_every_record,
    origin_offsets,
    recount,
    repoint_counted,
    standby_checks,
    standby_chosen,
)
from drkit.drills.summary import report_document, standby_lines, summary
from drkit.errors import ConfigError
from drkit.failover.model import Procedure, RunState
from drkit.failover.run_result import RunResult
from drkit.failover.runs import RunRecord
from drkit.failover.standby_choice import StandbyCandidate, choose
from drkit.records import Record, TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from tests.drill_samples import sample_report

BASE = {
    "name": "x",
    "title": "X",
    "workload": {"topics": [{"name": "orders"}]},
    "fault": {"kind": "kill_brokers", "at_s": 5},
    "policy": {"rto_s": 60},
}


def _scenario(**changes: object) -> Scenario:
    return Scenario.model_validate({**BASE, **changes})


# -- the scenario ------------------------------------------------------------------------------


def test_standbys_default_to_none_and_take_a_name_or_a_lag() -> None:
    assert _scenario().standbys == ()
    assert _scenario().clusters == ("dc1", "dc2")
    both = _scenario(standbys=["dc3", {"cluster": "dc4", "stopped_before_fault_s": 2}])
    assert [(s.cluster, s.stopped_before_fault_s) for s in both.standbys] == [
        ("dc3", 0.0),
        ("dc4", 2.0),
    ]
    assert both.clusters == ("dc1", "dc2", "dc3", "dc4")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"standbys": ["dc3", "dc3"]}, "given twice"),
        ({"standbys": ["dc2"]}, "not source or target"),
        ({"standbys": ["dc1"]}, "not source or target"),
        ({"standbys": [{"cluster": "dc3", "stopped_before_fault_s": 9}]}, "at most fault.at_s"),
        (
            {"standbys": ["dc3"], "fault": {"kind": "none"}, "move": {"procedure": "switchover"}},
            "unplanned failover",
        ),
        ({"standbys": ["dc3"], "move": {"failback": True}}, "no failback"),
        ({"standbys": [{"cluster": "dc3", "stopped_before_fault_s": -1}]}, "greater than"),
    ],
)
def test_bad_standbys_are_refused_naming_why(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _scenario(**changes)


def test_the_shipped_three_dc_drill_lets_dc3_lag_before_dc1_dies() -> None:
    scenario = load_scenario("three-dc-loss-of-dc1")
    assert (scenario.source, scenario.target) == ("dc1", "dc2")
    assert [s.cluster for s in scenario.standbys] == ["dc3"]
    lag = scenario.standbys[0].stopped_before_fault_s
    assert 0 < lag <= scenario.fault.at_s
    assert scenario.move.procedure is Procedure.FAILOVER and not scenario.planned


def test_a_standby_the_config_lacks_is_refused_naming_the_three_cluster_local_up() -> None:
    scenario = load_scenario("three-dc-loss-of-dc1")
    with pytest.raises(ConfigError) as refused:
        require_clusters(scenario, ["dc1", "dc2"], "drkit.yaml")
    text = str(refused.value)
    assert "dc3, not a cluster of drkit.yaml" in text
    assert "drkit local up --clusters dc1,dc2,dc3" in text and "nothing was done" in text
    require_clusters(scenario, ["dc1", "dc2", "dc3"], "drkit.yaml")  # all there: no error
    two = load_scenario("unplanned-loss-of-dc1")  # a two-cluster drill's words are unchanged
    with pytest.raises(
        ConfigError,
        match=r"names dc2, not a cluster of c.yaml \(clusters: dc1\); "
        "nothing was done",
    ):
        require_clusters(two, ["dc1"], "c.yaml")


# -- the drill's config ------------------------------------------------------------------------

CLUSTERS = {
    name: {"bootstrap_servers": f"127.0.0.1:{port}"}
    for name, port in (("dc1", 1), ("dc2", 2), ("dc3", 3))
}


def test_the_drill_config_adds_a_flow_to_each_other_standby_after_its_own_two(
    tmp_path: Path,
) -> None:
    env = DrillEnvironment.create(load_scenario("three-dc-loss-of-dc1"), CLUSTERS, tmp_path)
    tag = env.tag
    flows = [(f.source, f.target, f.standby) for f in env.config.flows]
    assert flows == [
        (f"dc1-{tag}", f"dc2-{tag}", False),
        (f"dc2-{tag}", f"dc1-{tag}", True),
        (f"dc1-{tag}", f"dc3-{tag}", False),
    ]
    assert env.flow.name == f"dc1-{tag}->dc2-{tag}"  # the drill's own flow stays the first
    assert set(env.config.clusters) == {f"dc1-{tag}", f"dc2-{tag}", f"dc3-{tag}"}
    manifest = json.loads((env.directory / "drill-manifest.json").read_text())
    assert f"dc1-{tag}.drill{tag}.orders" in manifest["topics"]  # the replica on dc2 and dc3
    assert env.cluster_of(f"standby dc3-{tag} lost to dc2-{tag}") == "standby dc3 lost to dc2"


def test_a_two_cluster_drill_config_is_as_it_was(tmp_path: Path) -> None:
    env = DrillEnvironment.create(load_scenario("unplanned-loss-of-dc1"), CLUSTERS, tmp_path)
    document = yaml.safe_load(env.config_path.read_text())
    assert list(document["clusters"]) == [f"dc1-{env.tag}", f"dc2-{env.tag}"]
    assert len(document["flows"]) == 2


def test_the_drill_environment_refuses_a_standby_missing_from_the_base_config(
    tmp_path: Path,
) -> None:
    two = {k: v for k, v in CLUSTERS.items() if k != "dc3"}
    with pytest.raises(ConfigError, match="drkit local up --clusters dc1,dc2,dc3"):
        DrillEnvironment.create(load_scenario("three-dc-loss-of-dc1"), two, tmp_path)
    assert not list(tmp_path.iterdir())  # refused before the drill's directory was made


# -- the recount -------------------------------------------------------------------------------

ORIGIN = TopicPartition("orders", 0)


def _copies(origin_offsets_: list[int], start: int = 0, cluster: str = "dc1") -> list[Record]:
    """Replica records at positions ``start``.. copying ``origin_offsets_`` of dc1's orders-0."""
    return [
        Record(
            "dc1.orders",
            0,
            start + i,
            None,
            b"v",
            ((SOURCE_HEADER, Provenance(cluster, "orders", 0, o).encode()),),
        )
        for i, o in enumerate(origin_offsets_)
    ]


def test_origin_offsets_count_only_copies_of_that_partition() -> None:
    records = [
        *_copies([0, 1]),
        *_copies([7], cluster="dc9"),  # another cluster's
        Record("dc1.orders", 0, 9, None, b"x", ()),  # no provenance
        Record("dc1.orders", 0, 10, None, b"x", ((SOURCE_HEADER, b"garbage"),)),
    ]
    assert origin_offsets(records, "dc1", ORIGIN) == [0, 1]


def test_the_recount_of_a_standby_that_followed_exactly() -> None:
    promoted = _copies(list(range(10)))
    standby = _copies(list(range(6))) + _copies([6, 7, 8, 9], start=6)
    counted = recount("dc1", ORIGIN, promoted, standby, standby_end_before=6)
    assert counted.promoted_holds == counted.standby_holds == 10
    assert (counted.missing, counted.duplicated, counted.only_on_standby) == (0, 0, 0)
    assert counted.written_after == 4


def test_the_recount_sees_a_record_twice_one_missing_and_one_only_on_the_standby() -> None:
    promoted = _copies(list(range(10)))
    standby = _copies(list(range(6))) + _copies([6, 6, 8, 9, 10], start=6)  # 6 twice, no 7
    counted = recount("dc1", ORIGIN, promoted, standby, standby_end_before=6)
    assert (counted.missing, counted.duplicated, counted.only_on_standby) == (1, 1, 1)
    assert counted.written_after == 5


# -- the checks --------------------------------------------------------------------------------


def _partition(**changes: object) -> StandbyPartition:
    good = StandbyPartition(
        topic="orders", partition=0, outcome="follow", detail="from 784 (frontier 784, map)",
        to_copy=491, copied=491, holes=0, unreachable=0, ahead=0, promoted_holds=1275,
        standby_holds=1275, missing=0, duplicated=0, only_on_standby=0, written_after=491,
    )  # fmt: skip
    return replace(good, **changes)  # type: ignore[arg-type]


GOOD_STANDBY = RepointedStandby("dc3", 4.0, 1.4, (_partition(), _partition(partition=1)))
CHOSEN = StandbyChosen("manual", "dc2", "dc2", "standby dc2 chosen for dc1 (...)")


def test_every_check_passes_on_a_standby_that_followed_exactly() -> None:
    checks = standby_checks(CHOSEN, "dc2", [GOOD_STANDBY])
    assert [c.name for c in checks] == [
        "standby_chosen",
        "standby_has_every_record",
        "standby_each_once",
        "repoint_counted",
    ]
    assert all(c.passed for c in checks), checks
    assert "holds 2550 records, every one of the promoted cluster's 2550" in checks[1].detail


def test_standby_chosen_fails_when_the_choice_named_another_standby() -> None:
    other = replace(CHOSEN, chosen="dc3")  # the drill moved to dc2 anyway, as --to would
    check = standby_chosen(other, "dc2")
    assert not check.passed and "manual choice: dc3 (the scenario's target: dc2)" in check.detail
    assert not standby_chosen(replace(CHOSEN, chosen=None), "dc2").passed
    assert not standby_chosen(replace(CHOSEN, promoted="dc3", chosen="dc3"), "dc2").passed


def test_each_once_fails_on_a_duplicate_record_on_dc3() -> None:
    broken = replace(GOOD_STANDBY, partitions=(_partition(duplicated=1), _partition(partition=1)))
    check = each_once([broken])
    assert not check.passed and check.detail == "dc3: 1 duplicated (orders[0] 1)"
    assert each_once([GOOD_STANDBY]).passed


def test_has_every_record_fails_on_a_missing_record_a_cannot_tell_and_no_re_point() -> None:
    missing = replace(GOOD_STANDBY, partitions=(_partition(missing=2),))
    check = has_every_record([missing])
    assert (
        not check.passed
        and "2 records of the promoted cluster missing (orders[0] 2)" in check.detail
    )
    untold = replace(GOOD_STANDBY, partitions=(_partition(outcome="cannot_tell", detail="why"),))
    assert "cannot tell orders[0]" in has_every_record([untold]).detail
    assert not has_every_record([untold]).passed
    failed = RepointedStandby("dc3", 4.0, None, error="not re-pointed: KafkaError: no answer")
    check = has_every_record([failed])
    assert not check.passed and check.detail == "dc3: not re-pointed: KafkaError: no answer"
    assert not has_every_record([]).passed


def test_repoint_counted_fails_when_copied_planned_and_written_differ() -> None:
    for broken in (_partition(copied=490), _partition(written_after=492), _partition(to_copy=1)):
        check = repoint_counted([replace(GOOD_STANDBY, partitions=(broken,))])
        assert not check.passed and check.detail.startswith("dc3 orders[0]: copied"), check
    ahead = _partition(outcome="ahead", to_copy=0, copied=0, ahead=5, written_after=3)
    check = repoint_counted([replace(GOOD_STANDBY, partitions=(ahead,))])
    assert not check.passed and "ahead, yet 3 written" in check.detail


def test_a_recount_of_broken_records_fails_the_checks_end_to_end() -> None:
    """From the records up: dc3 holding one record twice and lacking another."""
    promoted = _copies(list(range(10)))
    standby = _copies(list(range(6))) + _copies([6, 6, 8, 9], start=6)
    counted = recount("dc1", ORIGIN, promoted, standby, standby_end_before=6)
    partition = _partition(
        to_copy=4,
        copied=4,
        promoted_holds=counted.promoted_holds,
        standby_holds=counted.standby_holds,
        missing=counted.missing,
        duplicated=counted.duplicated,
        written_after=counted.written_after,
    )
    checks = standby_checks(CHOSEN, "dc2", [replace(GOOD_STANDBY, partitions=(partition,))])
    assert [c.name for c in checks if not c.passed] == [
        "standby_has_every_record",
        "standby_each_once",
    ]


# -- the choice, as the report says it ---------------------------------------------------------


def test_the_manual_choice_names_each_candidate_with_its_figures_in_the_scenarios_names() -> None:
    choice = choose(
        "dc1-t",
        [
            StandbyCandidate("dc2-t", True, "dc2-t is HEALTHY (1 of 1 observers reach it)", 0, 3.1),
            StandbyCandidate("dc3-t", True, "dc3-t is HEALTHY (1 of 1 observers reach it)", 0, 9.8),
        ],
    )
    chosen = manual_choice(choice, "dc2-t", lambda text: text.replace("-t", ""))
    assert (chosen.decision, chosen.chosen, chosen.promoted) == ("manual", "dc2", "dc2")
    assert "older evidence: 9.8s against dc2's 3.1s" in chosen.summary
    assert [(c["cluster"], c["outcome"], c["rpo_s"]) for c in chosen.candidates] == [
        ("dc2", "chosen", 3.1),
        ("dc3", "lost", 9.8),
    ]
    assert standby_chosen(chosen, "dc2").passed


def _run(run_id: int, target: str) -> RunRecord:
    at = datetime(2026, 12, 6, tzinfo=UTC)
    return RunRecord(
        run_id,
        Procedure.FAILOVER,
        "dc1",
        target,
        RunState.SUCCEEDED,
        "automation:drill",
        "",
        {},
        RunResult(),
        None,
        None,
        at,
        at,
        (),
    )


def _decision(
    target: str, act: bool, run_id: int | None, checks: list[dict[str, object]], summary_: str = ""
) -> StoredDecision:
    at = datetime(2026, 12, 6, tzinfo=UTC)
    return StoredDecision("drill", "dc1", target, act, summary_, {"checks": checks}, run_id, at)


def test_the_automatic_choice_is_read_back_from_the_acting_decisions_standby_check() -> None:
    decisions = [
        _decision("dc3", False, None, [], "standby: standby dc2 chosen ..."),
        _decision(
            "dc2",
            True,
            7,
            [
                {
                    "name": "standby",
                    "passed": True,
                    "detail": "standby dc2 chosen for dc1 (...) - dc3 lost",
                }
            ],
        ),
    ]
    chosen = automatic_choice(_run(7, "dc2"), decisions)
    assert (chosen.decision, chosen.chosen, chosen.promoted) == ("automatic", "dc2", "dc2")
    assert chosen.summary == "standby dc2 chosen for dc1 (...) - dc3 lost"
    assert [c["cluster"] for c in chosen.candidates] == ["dc2", "dc3"]
    alone = automatic_choice(_run(7, "dc3"), [_decision("dc2", False, None, [], "rpo: unknown")])
    assert alone.chosen == "dc3" and alone.summary == (
        "dc3's decision acted, the others held (dc2: rpo: unknown)"
    )
    assert not standby_chosen(alone, "dc2").passed


# -- the report --------------------------------------------------------------------------------


def _three_dc_report() -> DrillReport:
    return replace(
        sample_report(),
        standbys=Standbys(
            replace(
                CHOSEN,
                candidates=(
                    {
                        "cluster": "dc2",
                        "outcome": "chosen",
                        "rpo_records": 0,
                        "rpo_s": 3.1,
                        "health": "HEALTHY",
                        "why": "smallest",
                    },
                ),
            ),
            (GOOD_STANDBY,),
        ),
    )


def test_a_two_cluster_report_document_has_no_standbys_key() -> None:
    report = sample_report()
    assert report.standbys is None and "standbys" not in report.to_json()
    assert DrillReport.from_json(json.loads(json.dumps(report.to_json()))) == report
    assert 'id="standbys"' not in render_report(report)
    assert standby_lines(report) == [] and "re-pointed" not in summary(report)


def test_the_standbys_section_in_json_text_html_and_the_sentence() -> None:
    report = _three_dc_report()
    document = json.loads(json.dumps(report_document(report)))
    assert DrillReport.from_json(document) == report
    assert document["standbys"]["others"][0]["partitions"][0]["copied"] == 491
    assert "dc3 re-pointed onto dc2 (982 records copied in 1.4 s)" in summary(report)
    text = "\n".join(_report_text(report))
    assert (
        "re-point dc3 onto dc2: 1.4s (not part of the RTO); copied 982, holes 0, "
        "unreachable 0, standby ahead 0" in text
    )
    assert "dc2: chosen - RPO 0 records, evidence age 3.1s; smallest" in text
    page = render_report(report)
    assert 'id="standbys"' in page and 'data-standby="dc3">1.4 s</span>' in page
    table = page.split('class="repoint-table" data-standby="dc3"')[1].split("</table>")[0]
    assert table.count("<tr><td>orders</td>") == 2 and "from 784 (frontier 784, map)" in table


def test_drill_run_of_the_three_dc_drill_on_two_clusters_is_one_line_exit_2(
    tmp_path: Path,
) -> None:
    """`drkit local up` without `--clusters dc1,dc2,dc3`: refused before anything is touched,
    naming the missing cluster and how to get it - no traceback."""
    config = tmp_path / "drkit.yaml"
    config.write_text(
        yaml.safe_dump({"clusters": {k: v for k, v in CLUSTERS.items() if k != "dc3"}})
    )
    done = CliRunner().invoke(
        cli,
        [
            "--state-dir",
            str(tmp_path),
            "drill",
            "run",
            "three-dc-loss-of-dc1",
            "--skip-verify",
            "--config",
            str(config),
        ],
    )
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert "names dc3, not a cluster of" in done.output
    assert "drkit local up --clusters dc1,dc2,dc3" in done.output


def test_the_re_point_event_counts_the_workload_as_the_report_does() -> None:
    """The event said "1264 records copied" where the report said 1,260: it counted the
    heartbeats the re-point copies too."""
    from drkit.drills.repointing import copied_event
    from drkit.offsets.follow_on import Copied

    def copied(topic: str, count: int) -> tuple[TopicPartition, Copied]:
        tp = TopicPartition(topic, 0)
        return tp, Copied(tp, tp, tp, 0, 0, count, count, 0, count)

    done = dict([copied("orders", 1260), copied("heartbeats", 4)])
    text = copied_event("dc3", done, [TopicPartition("orders", 0)])
    assert text == "dc3: 1260 records of the workload copied (and 4 of drkit's own topics)"
    assert copied_event("dc3", dict([copied("orders", 7)]), [TopicPartition("orders", 0)]) == (
        "dc3: 7 records of the workload copied"
    )
