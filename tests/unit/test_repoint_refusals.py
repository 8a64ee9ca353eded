"""`drkit flows repoint` without --plan refuses, with one line naming the cause and no
traceback, before it reads or writes a record: an unknown cluster (exit 2), a pointer not on
the promoted cluster or moved there by a run from another cluster than the lost one (exit 2:
re-pointing before the failover would let the standby follow a standby), the promoted cluster
not answering (exit 3).  A report with a partition that cannot be told is printed as refused,
nothing copied (exit 3), with no onward flow.  And the onward flow it tells the operator to add
is a valid flow."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from drkit.cli import cli
from drkit.cli.flows_cmd import _onward, _print_repoint
from drkit.config.loader import load_config
from drkit.failover.pointer import PointerRepository
from drkit.offsets.follow_on import Copied
from drkit.offsets.repoint_inputs import RepointReport
from drkit.records import TopicPartition
from drkit.repoint import CannotTell, Evidence, FollowFrom
from drkit.store import StateStore
from drkit.store.models import FailoverRun
from drkit.translation import PartitionMapping


def _config(tmp_path: Path, onward: bool = False) -> Path:
    path = tmp_path / "c.yaml"
    flows = [{"source": "dc1", "target": t, "exactly_once": True} for t in ("dc2", "dc3")]
    if onward:
        flows.append({"source": "dc2", "target": "dc3"})
    # Ports nothing listens on: the refusals come before any cluster is asked.
    ports = {"dc1": 1, "dc2": 2, "dc3": 3}
    document = {
        "clusters": {a: {"bootstrap_servers": f"127.0.0.1:{p}"} for a, p in ports.items()},
        "flows": flows,
        "state_store": {"url": f"sqlite:///{tmp_path / 'drkit.db'}"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def _store(tmp_path: Path) -> StateStore:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    return store


def _point(store: StateStore, cluster: str, run_from: str | None) -> None:
    run_id = None
    if run_from is not None:
        with store.session() as session:
            row = FailoverRun(kind="failover", source=run_from, target=cluster, state="succeeded")
            session.add(row)
            session.flush()
            run_id = row.id
    PointerRepository(store).move(cluster, run_id)


def _repoint(tmp_path: Path, config: Path, *extra: str) -> tuple[int, str]:
    args = ["--state-dir", str(tmp_path), "flows", "repoint", "--config", str(config),
            "--from", "dc1", "--to", "dc2", "--standby", "dc3", *extra]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_an_unknown_cluster_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path)
    code, out = _repoint(tmp_path, config, "--standby", "dc9")
    assert code == 2 and "unknown cluster 'dc9'" in out, out


@pytest.mark.parametrize(
    ("pointer", "why"),
    [
        (None, "the pointer is not set, not on dc2: run `drkit failover --from dc1` first"),
        (("dc1", None), "the pointer is on dc1, not on dc2"),
        (("dc2", "dc3"), "the pointer moved to dc2 from dc3, not after dc1"),
        (("dc2", None), "the pointer moved to dc2 by hand, not after dc1"),
    ],
)
def test_the_pointer_must_be_on_the_promoted_cluster_after_the_lost_one(
    tmp_path: Path, pointer: tuple[str, str | None] | None, why: str
) -> None:
    config = _config(tmp_path)
    store = _store(tmp_path)
    if pointer is not None:
        _point(store, *pointer)
    code, out = _repoint(tmp_path, config)
    assert code == 2, out
    assert why in " ".join(out.split()), out


def test_a_promoted_cluster_not_answering_is_told(tmp_path: Path) -> None:
    config = _config(tmp_path)
    _point(_store(tmp_path), "dc2", "dc1")
    code, out = _repoint(tmp_path, config)
    assert code == 3, out
    assert "dc2" in out and "127.0.0.1:2" in out, out


def test_the_onward_flow_to_add_is_the_standby_flow_from_the_promoted_cluster(
    tmp_path: Path,
) -> None:
    config = load_config(_config(tmp_path))
    onward = _onward(config, "dc2", "dc3", "dc1")
    assert onward["flow"] == "dc2->dc3" and not onward["configured"]
    added = yaml.safe_load(onward["yaml"])["flows"]
    # follows: dc2's replicas of dc1 carried onto dc3 by name (the onward map's groups).
    assert added == [{"source": "dc2", "target": "dc3", "exactly_once": True, "follows": ["dc1"]}]
    configured = _onward(load_config(_config(tmp_path, onward=True)), "dc2", "dc3", "dc1")
    assert configured == {"flow": "dc2->dc3", "configured": True, "yaml": None, "follows": False}


def _report(untold: bool) -> RepointReport:
    first, second = TopicPartition("orders", 0), TopicPartition("orders", 1)
    replica = TopicPartition("dc1.orders", 1)
    composed = PartitionMapping(replica, replica, [])
    follows = FollowFrom(second, 400, 400, 60, 0, 0, composed, Evidence.MAP)
    results = {first: CannotTell(first, "why") if untold else follows, second: follows}
    replicas = {tp: (TopicPartition("dc1.orders", tp.partition),) * 2 for tp in results}
    return RepointReport("dc1", "dc2", "dc3", results, replicas)


def test_a_partition_that_cannot_be_told_is_printed_as_refused_with_nothing_copied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    onward = {"flow": "dc2->dc3", "configured": False, "yaml": "flows:\n- source: dc2\n"}
    with pytest.raises(SystemExit) as stopped:
        _print_repoint(_report(untold=True), {}, "text", onward)
    assert stopped.value.code == 3
    out = capsys.readouterr().out
    assert "dc3 following dc2 after dc1: refused, nothing copied" in out, out
    assert "orders-0 (dc1.orders-0 -> dc1.orders-0): cannot tell: why" in out, out
    assert "flows:" not in out, out


def test_a_run_prints_per_partition_what_it_copied_and_the_onward_flow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    replica = TopicPartition("dc1.orders", 1)
    done = Copied(TopicPartition("orders", 1), replica, replica, 400, 400, 80, 60, 400, 460, 2)
    onward = {"flow": "dc2->dc3", "configured": False, "yaml": "flows:\n- source: dc2\n"}
    report = _report(untold=False)
    _print_repoint(report, {TopicPartition("orders", 1): done}, "json", onward)
    document = json.loads(capsys.readouterr().out)
    assert document["plan"] is False
    assert document["onward"] == {**onward, "map_not_written": None}
    rows = {row["origin"]: row for row in document["partitions"]}
    assert (rows["orders-1"]["copied"], rows["orders-1"]["placed"]) == (60, 2)
    assert (rows["orders-0"]["copied"], rows["orders-0"]["placed"]) == (0, 0)
    _print_repoint(report, {TopicPartition("orders", 1): done}, "text", onward)
    out = capsys.readouterr().out
    assert "dc3 following dc2 after dc1: 60 copied" in out, out
    assert "60 copied (and the offset syncs of 2 earlier copies)" in out, out
    assert "flows:\n- source: dc2\n" in out, out
    assert "onward map: 0 dc2 positions newly mapped onto dc3" in out, out
    # No flow dc2->dc3 yet: the run says the onward map waits for it.
    missing = replace(report, onward="no flow dc2->dc3 in the config")
    _print_repoint(missing, {TopicPartition("orders", 1): done}, "text", onward)
    out = capsys.readouterr().out
    assert "onward map not written" in out and "no flow dc2->dc3" in out, out
