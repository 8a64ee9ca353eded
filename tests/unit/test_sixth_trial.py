"""The sixth new-user trial of issue 45: bad inputs that were accepted, or answered with the
wrong words, each refused or named in one line with the exit code the README's table gives.

No broker runs here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.unit.test_fifth_trial import _CONFIG, _config, _drkit  # one set of CLI helpers

# -- n18, n24-n27, q10, m10-m12: NaN and infinity as seconds -----------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["adopt", "--flow", "dc1:dc2", "--quiet", "nan"], "--quiet"),
        (["adopt", "--flow", "dc1:dc2", "--quiet", "inf"], "--quiet"),
        (["adopt", "--flow", "dc1:dc2", "--quiet", "1e308"], "--quiet"),
        (["flows", "pause", "dc1:dc2", "-m", "x", "--wait", "nan"], "--wait"),
        (["replicate", "--commit-interval", "nan"], "--commit-interval"),
        (["replicate", "--transaction-timeout", "nan"], "--transaction-timeout"),
        (["replicate", "--commit-interval", "inf"], "--commit-interval"),
    ],
)
def test_seconds_that_are_not_finite_are_refused_before_anything_runs(
    tmp_path: Path, args: list[str], option: str
) -> None:
    """`adopt --quiet nan` printed "checking that MirrorMaker 2 wrote nothing to dc2 for nans"
    and went on: click's FloatRange compares NaN false with both bounds."""
    done = _drkit(tmp_path, *args, "--config", _config(tmp_path))
    assert done.exit_code == 2, done.output
    assert f"'{option}'" in done.output
    assert "wrote nothing" not in done.output
    assert "Traceback" not in done.output


# -- a087, s08-s14: drill scenarios ------------------------------------------------------------


_SCENARIO = """\
name: s
title: a scenario
workload:
  topics: [{name: orders, partitions: 1, records_per_s: 10}]
  warmup_s: 1
policy: {rto_s: 60}
"""


def _scenario(tmp_path: Path, text: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return str(path)


def test_an_empty_scenario_name_is_said_to_be_empty(tmp_path: Path) -> None:
    """`drill run ''` answered ".: is a directory, not a file"."""
    done = _drkit(tmp_path, "drill", "run", "", "--config", _config(tmp_path))
    assert done.exit_code == 2, done.output
    assert "SCENARIO: cannot be empty" in done.output
    assert "is a directory" not in done.output


@pytest.mark.parametrize(
    ("change", "said", "not_said"),
    [
        # s09: a regex, not words
        (
            ("name: s", "name: Bad_Name"),
            "name: may hold only lowercase letters, digits and '-'",
            "pattern",
        ),
        # s10: a Python class name
        ((_SCENARIO, "- a\n- b\n"), "must be a mapping", "instance of Scenario"),
        # s13: "Tuple should have at least 1 item after validation, not 0"
        (
            ("topics: [{name: orders, partitions: 1, records_per_s: 10}]", "topics: []"),
            "workload.topics: must hold at least 1 item",
            "Tuple",
        ),
        # s08: the rate's bound, and no second line saying topics is empty
        (
            ("records_per_s: 10", "records_per_s: 1e9"),
            "workload.topics[0].records_per_s: at most 50000",
            "at least 1 item",
        ),
        # s12: NaN is not "more than 3600"
        (
            ("warmup_s: 1", "warmup_s: .nan"),
            "workload.warmup_s: must be a finite number",
            "less than",
        ),
        # s14: two topics of one name passed, and the drill failed creating the second (exit 1)
        (
            (
                "topics: [{name: orders, partitions: 1, records_per_s: 10}]",
                "topics: [{name: orders}, {name: orders}]",
            ),
            "workload: topic 'orders' is given twice",
            "Duplicate topic",
        ),
    ],
)
def test_a_bad_scenario_is_told_in_words_before_anything_runs(
    tmp_path: Path, change: tuple[str, str], said: str, not_said: str
) -> None:
    text = _SCENARIO.replace(*change)
    assert text != _SCENARIO
    done = _drkit(tmp_path, "drill", "run", _scenario(tmp_path, text), "--config",
                  _config(tmp_path))  # fmt: skip
    assert done.exit_code == 2, done.output
    assert said in done.output
    assert not_said not in done.output
    assert "Traceback" not in done.output


# -- x02: YAML merge keys ----------------------------------------------------------------------


def test_a_yaml_merge_key_is_yaml_not_an_error(tmp_path: Path) -> None:
    """`<<: *anchor` (a mapping merged in, a key of it overridden) was refused with "could not
    determine a constructor for the tag 'tag:yaml.org,2002:merge'"; a key given twice is still
    refused."""
    path = tmp_path / "drkit.yaml"
    path.write_text(
        "clusters:\n"
        "  dc1: &common\n    bootstrap_servers: '127.0.0.1:1'\n"
        "    client_overrides: {linger.ms: 5}\n"
        "  dc2:\n    <<: *common\n    bootstrap_servers: '127.0.0.1:2'\n"
        "flows: [{source: dc1, target: dc2}]\n"
    )
    done = _drkit(tmp_path, "config", "validate", str(path))
    assert done.exit_code == 0, done.output
    shown = _drkit(tmp_path, "config", "show", "-o", "json", "--config", str(path))
    assert '"127.0.0.1:2"' in shown.output and '"linger.ms": 5' in shown.output, shown.output
    path.write_text(path.read_text().replace("  dc2:\n", "  dc2:\n    bootstrap_servers: x:1\n"))
    twice = _drkit(tmp_path, "config", "validate", str(path))
    assert twice.exit_code == 2
    assert "'bootstrap_servers' is given twice in one mapping" in twice.output


# -- c21b: a command's option before the command -----------------------------------------------


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--config", "x.yaml", "failover", "--plan"], "drkit failover --config ..."),
        (["-o", "json", "status"], "drkit status -o ..."),
        (["--config=x.yaml", "clusters", "check"], "drkit clusters check --config ..."),
    ],
)
def test_an_option_of_the_commands_given_before_the_command_says_where_it_goes(
    tmp_path: Path, args: list[str], hint: str
) -> None:
    """`drkit --config F failover ...` said only "No such option '--config'" - every command
    has it."""
    done = _drkit(tmp_path, *args)
    assert done.exit_code == 2, done.output
    assert "goes after the command" in done.output, done.output
    assert hint in done.output


def test_an_option_no_command_has_is_still_unknown(tmp_path: Path) -> None:
    done = _drkit(tmp_path, "--no-such", "status")
    assert done.exit_code == 2
    assert "No such option" in done.output
    assert "goes after the command" not in done.output


# -- j11, p17: a group with no committed offsets -----------------------------------------------


def test_a_group_error_without_a_partition_has_no_stray_dash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`offsets translate --group nosuchgroup` said "group nosuchgroup -: no committed ..."."""
    from drkit.cli.offsets_cmd import _print
    from drkit.config.model import FlowConfig
    from drkit.offsets.lookup import Report

    report = Report(FlowConfig(source="dc1", target="dc2"), "live", True)
    report.errors.append({"group": "nosuchgroup", "reason": "no committed offsets"})
    report.errors.append(
        {"group": "billing", "source_topic": "orders", "source_partition": 3, "reason": "gone"}
    )
    _print(report)
    said = capsys.readouterr().err
    assert "group nosuchgroup: no committed offsets" in said, said
    assert "group billing orders-3: gone" in said
    assert " -:" not in said


# -- p10, p12, p03/a032: offsets translate --offset --------------------------------------------


@pytest.mark.parametrize("document", ["{}", "[]", '{"topic": "orders"}', "5"])
def test_offsets_on_stdin_that_are_no_list_of_positions_are_refused(document: str) -> None:
    """`echo '{}' | drkit offsets translate --offset -` printed an empty table, exit 0."""
    import io

    from drkit.errors import ConfigError
    from drkit.offsets.lookup import parse_offsets

    with pytest.raises(ConfigError) as refused:
        parse_offsets(["-"], io.StringIO(document))
    assert "--offset -" in str(refused.value)


def test_a_given_offset_past_the_sources_log_end_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--offset orders:0:999999999` (dc1's log ends at 100) was translated to the replica's
    end, exit 0, flagged only past_replicated: a typo looked like replication lag."""
    from drkit.config import load_config_text
    from drkit.kafka import KafkaAdmin
    from drkit.offsets import lookup
    from drkit.records import TopicPartition

    config = load_config_text(_CONFIG)
    asked: dict[str, object] = {}
    monkeypatch.setattr(KafkaAdmin, "not_answering", lambda _self, *_a, **_k: None)
    monkeypatch.setattr(KafkaAdmin, "wait_ready", lambda _self, *_a, **_k: 1)
    three = SimpleNamespace(partition_count=3)
    monkeypatch.setattr(KafkaAdmin, "list_topics", lambda _self, *_a, **_k: {"orders": three})
    monkeypatch.setattr(
        KafkaAdmin, "list_offsets", lambda _self, tps, *_a, **_k: dict.fromkeys(tps, 100)
    )
    monkeypatch.setattr(lookup, "_translate", lambda *a, **_k: asked.update(given=a[2]))
    report = lookup.translate_offsets(
        config, config.flows[0],
        {TopicPartition("orders", 0): 999_999_999, TopicPartition("orders", 1): 100},
        keys=None, connect=KafkaAdmin,
    )  # fmt: skip
    assert asked["given"] == {lookup.GIVEN_OFFSETS: {TopicPartition("orders", 1): 100}}
    [error] = report.errors
    assert error["source_partition"] == 0
    assert "past dc1's log end (100)" in error["reason"]


# -- i08, j14: adopt with a cluster that does not answer as Kafka ------------------------------


def test_adopt_names_a_cluster_that_does_not_answer_before_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With dc1 frozen (or an HTTP server as dc1) adopt printed "checking that MirrorMaker 2
    wrote nothing to dc2 for 10s" and said "Broker transport failure" after 16-18 s; every
    other command names such a listener in about 3 s."""
    import drkit.kafka.clients
    from drkit.adoption.adopt import Adopter

    def hung(endpoint: object, *_a: object, **_k: object) -> str | None:
        if getattr(endpoint, "alias", "") == "dc1":
            return "127.0.0.1:1 accepts connections but does not answer Kafka's first request"
        return None

    def adopting(*_a: object, **_k: object) -> None:
        raise AssertionError("the adoption started")

    monkeypatch.setattr(drkit.kafka.clients, "not_answering", hung)
    monkeypatch.setattr(Adopter, "run", adopting)
    done = _drkit(tmp_path, "adopt", "--flow", "dc1:dc2", "--config", _config(tmp_path))
    assert done.exit_code == 3, done.output
    assert "cluster 'dc1' at 127.0.0.1:1 is unreachable" in done.output
    assert "does not answer Kafka's first request" in done.output
    assert "checking that MirrorMaker 2" not in done.output


# -- s02: a scenario naming a cluster the config does not have ---------------------------------


def test_a_scenario_naming_an_unknown_cluster_is_refused_before_the_drill_machinery_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`source: dc9` was refused only inside the drill service, after matplotlib, alembic and
    the failover engine were imported (3.9-5.3 s, 1.3 s of CPU)."""
    import drkit.cli.failover_cmd

    def loading(*_a: object, **_k: object) -> None:
        raise AssertionError("the drill machinery was loaded")

    monkeypatch.setattr(drkit.cli.failover_cmd, "progress_printer", loading)
    text = _SCENARIO.replace("name: s\n", "name: s\nsource: dc9\nfault: {kind: kill_brokers}\n")
    done = _drkit(tmp_path, "drill", "run", _scenario(tmp_path, text), "--skip-verify",
                  "--config", _config(tmp_path))  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "names dc9, not a cluster of" in done.output
    assert "(clusters: dc1, dc2); nothing was done" in done.output


# -- e16b: doctor and a replication factor the target cannot hold ------------------------------


def test_doctor_fails_a_replication_factor_above_the_targets_brokers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`target_replication_factor: 1000` on a one-broker dc2: doctor said all was well, and
    replicate stopped (exit 10) on the first replica it had to create."""
    from drkit.access import doctor
    from drkit.access.doctor import ClusterFacts, Status
    from drkit.config import load_config_text
    from tests.fake_kafka import FakeClusters

    config = load_config_text(
        _CONFIG.replace("target: dc2}", "target: dc2, target_replication_factor: 1000}")
    )
    monkeypatch.setattr(
        doctor, "examine_cluster", lambda alias, *_a: ClusterFacts(alias, brokers=1)
    )
    monkeypatch.setattr(doctor, "installation_findings", lambda *_a: [])
    found = doctor.examine(
        config, ["dc1", "dc2"], 5.0, lambda: "java", lambda: None,  # type: ignore[arg-type,return-value]
        connect=FakeClusters().connect,  # not asked: examine_cluster is replaced above
    )  # fmt: skip
    [rf] = [f for f in found if "replication factor" in f.check]
    assert (rf.status, rf.cluster) == (Status.FAIL, "dc2")
    assert "target_replication_factor 1000" in rf.detail and "1 broker" in rf.detail
    three = {a: ClusterFacts(a, brokers=1000) for a in ("dc1", "dc2")}
    assert all(f.status is Status.OK for f in doctor.replication_factor_findings(config, three))


# -- s15: a drill between clusters the config has no flow between ------------------------------


def test_a_drill_between_clusters_with_no_configured_flow_says_what_it_rehearses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only dc2->dc1 configured, `drill run` of a dc1 -> dc2 scenario ran a full failover
    (PolicyMet) without a word, while `drill readiness` refused: no flow dc1->dc2."""
    import drkit.cli.failover_cmd

    def loading(*_a: object, **_k: object) -> None:
        raise SystemExit(0)  # the drill itself is not the point

    monkeypatch.setattr(drkit.cli.failover_cmd, "progress_printer", loading)
    config = tmp_path / "reverse.yaml"
    config.write_text(
        _CONFIG.replace("source: dc1, target: dc2", "source: dc2, target: dc1")
        + f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    text = _SCENARIO.replace("name: s\n", "name: s\nfault: {kind: kill_brokers}\n")
    done = _drkit(tmp_path, "drill", "run", _scenario(tmp_path, text), "--skip-verify",
                  "--config", str(config))  # fmt: skip
    assert "has no flow dc1->dc2" in done.output, done.output
    assert "its own topics and flow" in done.output


# -- f22: a drill schedule that never fires ----------------------------------------------------


def test_a_drill_schedule_that_never_fires_is_warned(tmp_path: Path) -> None:
    """`cron: '0 3 31 2 *'` (February 31st) validated without a word: the drill never runs."""
    path = tmp_path / "drkit.yaml"
    path.write_text(
        _CONFIG + "drills:\n  schedule:\n"
        "    - {cron: '0 3 31 2 *', source: dc1, target: dc2}\n"
        "    - {cron: '0 3 * * 1', source: dc1, target: dc2}\n"
    )
    done = _drkit(tmp_path, "config", "validate", str(path))
    assert done.exit_code == 0, done.output
    assert "drills.schedule[0].cron: '0 3 31 2 *' never fires" in done.output
    assert "schedule[1]" not in done.output
