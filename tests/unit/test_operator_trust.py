"""Issue 45, operator trust: bad or unusual input gets one clear line naming the cause, each
exit code keeps its one meaning, nothing is destructive by accident or left half-done.

No broker runs here: clusters are addresses nothing listens on, stores are SQLite files."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli
from drkit.errors import UnreachableClusterError
from tests.kafka_requests import record_kafka_requests
from tests.unit.test_not_kafka import _listener

_BOTH_WAYS = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n"
)


def _drkit(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "state"), *args])


def _config(tmp_path: Path, text: str = _BOTH_WAYS) -> str:
    path = tmp_path / "drkit.yaml"
    path.write_text(text + f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n")
    return str(path)


def failed_run(tmp_path: Path) -> int:
    """One FAILED failover run dc1 -> dc2 in the SQLite store ``tmp_path / "drkit.db"``."""
    from drkit.failover.model import Direction, Plan, Procedure, RunState
    from drkit.failover.run_result import RunResult
    from drkit.failover.runs import RunRepository
    from drkit.lag import PartitionRpo
    from drkit.store import StateStore

    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    plan = Plan(
        procedure=Procedure.FAILOVER, source="dc1", target="dc2", flow="dc1->dc2",
        reverse_flow=None, source_reachable=False, translation_mode="checkpoints", steps=(),
        groups=(), groups_without_checkpoint=(), rpo=(PartitionRpo("t", 0, 1, 1, 0, 0, 0.0),),
        findings=(), pointer_from="dc1", pointer_to="dc2",
    )  # fmt: skip
    runs = RunRepository(store)
    run = runs.create(plan, "test", "")
    runs.finish(run.id, RunState.FAILED, RunResult(error="x", direction=Direction.FORWARD))
    store.engine.dispose()
    return run.id


# -- item 4: a failback when nothing failed over ----------------------------------------------


def test_a_failback_with_no_move_recorded_says_there_is_nothing_to_fail_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "--from: no active pointer recorded: name the primary" (exit 2) - and, given
    --from, planned a failback whose blocker read "the active pointer is on nothing"."""
    # The clusters are addresses nothing listens on: the planned move's first check of both
    # (tests/unit/test_not_kafka.py) is passed as if they answered, to reach the plan.
    monkeypatch.setattr("drkit.cli.failover_cmd._require_both_answering", lambda *_args: None)
    config = _config(tmp_path)
    done = _drkit(tmp_path, "failback", "--to", "dc1", "--plan", "--config", config)
    assert done.exit_code == 4, done.output
    assert "nothing to fail back to dc1: no failover or switchover was recorded" in done.output
    assert "the active pointer is unset" in done.output and "dc1, the first flow's" in done.output
    assert len(done.output.strip().splitlines()) == 1, done.output
    assert "Traceback" not in done.output
    planned = _drkit(tmp_path, "failback", "--to", "dc1", "--from", "dc2", "--plan",
                     "--config", config)  # fmt: skip
    assert planned.exit_code == 4, planned.output
    assert "on nothing" not in planned.output, planned.output
    assert "BLOCKER: nothing to fail back: no failover or switchover was recorded" in planned.output


def test_a_failback_to_the_cluster_the_pointer_is_on_says_there_is_nothing_to_fail_back(
    tmp_path: Path,
) -> None:
    from drkit.failover.pointer import PointerRepository
    from drkit.store import StateStore

    config = _config(tmp_path)
    run_id = failed_run(tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    PointerRepository(store).move("dc1", run_id)
    store.engine.dispose()
    done = _drkit(tmp_path, "failback", "--to", "dc1", "--yes", "--config", config)
    assert done.exit_code == 4, done.output
    assert (
        f"nothing to fail back: the active pointer is already on dc1, moved there by run {run_id}"
        in done.output
    ), done.output


# -- item 5: failover --plan --resume -----------------------------------------------------------


def test_plan_beside_resume_is_refused_saying_why_and_changes_nothing(tmp_path: Path) -> None:
    """It said "--plan: 'drkit failover show RUN' shows a run" - not why --plan was refused."""
    config = _config(tmp_path)
    run_id = failed_run(tmp_path)
    done = _drkit(tmp_path, "failover", "--plan", "--resume", str(run_id), "--config", config)
    assert done.exit_code == 2, done.output
    assert "--plan/--resume: nothing to plan: a resume makes no new plan" in done.output
    assert f"'drkit failover --resume {run_id}' shows what is left" in done.output, done.output
    assert "nothing was done" in done.output
    shown = _drkit(tmp_path, "failover", "show", str(run_id), "-o", "json", "--config", config)
    assert json.loads(shown.stdout)["state"] == "failed"


# -- item 3: --write-spec into a missing directory ---------------------------------------------


def test_write_spec_into_a_missing_directory_is_refused_naming_it(tmp_path: Path) -> None:
    """The directory was created silently (a typo put the spec out of sight); every other output
    file's option (--html, config import --out) refuses it: exit 2, nothing done."""
    config = _config(tmp_path)
    missing = tmp_path / "no" / "such"
    done = _drkit(tmp_path, "verify", "--flow", "dc1:dc2", "--write-spec",
                  str(missing / "spec.json"), "--config", config)  # fmt: skip
    assert done.exit_code == 2, done.output
    assert f"--write-spec: cannot write {missing / 'spec.json'}: {missing} does not exist" in (
        done.output
    ), done.output
    assert not (tmp_path / "no").exists()
    assert not (tmp_path / "drkit.db").exists()  # refused before the store or a cluster


# -- item 6: a drill scenario that is not valid YAML --------------------------------------------


def test_a_scenario_with_a_yaml_syntax_error_is_one_line_naming_file_line_and_column(
    tmp_path: Path,
) -> None:
    """PyYAML's message spanned five lines (the text quoted, a caret under it) and named no
    column in drkit's words; drkit.yaml's errors were already one line."""
    scenario = tmp_path / "broken.yaml"
    scenario.write_text("name: broken\nworkload:\n  topics: [orders\n  groups: 2\n")
    done = _drkit(tmp_path, "drill", "run", str(scenario))
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, done.output
    assert lines[0].startswith(f"error: {scenario}: line 4, column 9: invalid YAML: "), lines[0]
    assert "expected ',' or ']', but got ':'" in lines[0], lines[0]
    assert "(while parsing a flow sequence at line 3, column 11)" in lines[0], lines[0]
    twice = tmp_path / "twice.yaml"
    twice.write_text("name: a\nname: b\n")
    done = _drkit(tmp_path, "drill", "run", str(twice))
    assert done.exit_code == 2, done.output
    assert f"{twice}: line 2, column 1: invalid YAML: 'name' is given twice" in done.output


# -- item 2: replicate with a cluster that does not answer --------------------------------------


def test_replicate_with_a_refused_cluster_says_so_in_one_line_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It retried for ever, printing librdkafka's errors; now the start-up check `clusters
    check` and `verify` use names the cluster and its address: exit 3, nothing started."""
    config = _config(tmp_path, _BOTH_WAYS.replace(", {source: dc2, target: dc1}", ""))
    requests = record_kafka_requests(monkeypatch)
    done = _drkit(tmp_path, "replicate", "--config", config)
    assert done.exit_code == 3, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, done.output
    assert lines[0].startswith("error: cluster 'dc1' at 127.0.0.1:1 is unreachable (no bootstrap")
    assert "Traceback" not in done.output
    # Told at once, not after a client's retries: no Kafka request was made (any request to
    # a refused cluster waits out its timeout - issue 51: a count, not a clock).
    assert requests == [], requests
    # A taken --metrics-port is still bad input (exit 2), told before the clusters are asked.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = _drkit(tmp_path, "replicate", "--metrics-port", str(port), "--config", config)
    assert done.exit_code == 2, done.output
    assert f"--metrics-port: cannot listen on 127.0.0.1:{port}: Address already in use" in (
        done.output
    ), done.output


# -- item 1: acls --apply on a cluster that lets everyone in -------------------------------------


def test_the_resources_new_acls_close_are_those_no_existing_acl_covers() -> None:
    """The first ACL on a resource makes the authorizer check ACLs there: with
    allow.everyone.if.no.acl.found every principal it does not name is locked out."""
    from drkit.acl.rules import (
        AclEntry,
        Operation,
        PatternType,
        Resource,
        ResourceType,
        newly_checked,
    )

    every = Resource(ResourceType.TOPIC, "*")
    prefixed = Resource(ResourceType.TOPIC, "dc1.", PatternType.PREFIXED)
    orders = Resource(ResourceType.TOPIC, "orders")
    group = Resource(ResourceType.GROUP, "g")
    added = [
        AclEntry("User:r", every, Operation.DESCRIBE),
        AclEntry("User:r", prefixed, Operation.WRITE),
        AclEntry("User:r", prefixed, Operation.CREATE),
        AclEntry("User:r", group, Operation.READ),
    ]
    assert newly_checked([], added) == tuple(sorted({every, prefixed, group}))
    others = [AclEntry("User:app", orders, Operation.READ)]  # covers none of them
    assert newly_checked(others, added) == tuple(sorted({every, prefixed, group}))
    covering = [AclEntry("User:app", every, Operation.READ)]  # ACLs checked on every topic
    assert newly_checked(covering, added) == (group,)
    shorter = [AclEntry("User:app", Resource(ResourceType.TOPIC, "dc", PatternType.PREFIXED),
                        Operation.READ)]  # fmt: skip
    assert newly_checked(shorter, added) == tuple(sorted({every, group}))


def _answers_as_kafka(connection: socket.socket) -> None:
    """Kafka's answer header to drkit's first request: size, then its correlation id."""
    request = connection.recv(64)
    connection.sendall((4).to_bytes(4, "big") + request[8:12])
    connection.close()


def test_replicate_runs_the_flows_whose_clusters_answer_and_names_the_one_that_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster only some flows need does not hold the others back: it is a warning naming
    those flows (they start once it answers, as after any outage)."""
    from drkit.cli.preflight import require_flows_answering
    from drkit.config.loader import load_config

    with _listener(_answers_as_kafka) as port:
        path = _config(tmp_path, (
            f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
            f"  dc2: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
            "  dc3: {bootstrap_servers: '127.0.0.1:1'}\n"
            "flows: [{source: dc1, target: dc2}, {source: dc3, target: dc2}]\n"
        ))  # fmt: skip
        config = load_config(path)
        require_flows_answering(config, list(config.flows))
        said = capsys.readouterr().err
        assert said.startswith("warning: cluster 'dc3' at 127.0.0.1:1 is unreachable"), said
        assert said.rstrip().endswith(": dc3->dc2 wait for it; replicating dc1->dc2"), said
        with pytest.raises(
            UnreachableClusterError, match=re.escape("cluster 'dc3' at 127.0.0.1:1")
        ):
            require_flows_answering(config, [config.flows[1]])


def test_a_failback_export_file_in_a_missing_directory_is_refused_before_anything(
    tmp_path: Path,
) -> None:
    """The tail step created the directory silently, after the fence; refused up front now, as
    --write-spec and every other output file is."""
    missing = tmp_path / "no" / "such"
    done = _drkit(tmp_path, "failback", "--to", "dc1", "--from", "dc2", "--export-file",
                  str(missing / "tail.jsonl"), "--yes", "--config", _config(tmp_path))  # fmt: skip
    assert done.exit_code == 2, done.output
    assert f"--export-file: cannot write {missing / 'tail.jsonl'}: {missing} does not exist" in (
        done.output
    ), done.output
    assert not (tmp_path / "no").exists() and not (tmp_path / "drkit.db").exists()
