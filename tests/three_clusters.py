"""Three clusters for the integration tests of issue 48 item 1 (tests/integration/
test_three_clusters.py, test_repoint_plan.py, test_repoint_run.py): the config ``drkit local up
--clusters`` writes for a source and two standbys, the estate the re-pointing tests start from,
and the names the helpers there share."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import yaml

from drkit.config.loader import load_config
from drkit.kafka import KafkaAdmin
from drkit.kafka.io import consume_ranges
from drkit.local.cluster import ClusterStatus
from drkit.local.config_writer import write_local_config
from drkit.offsets.provenance_search import SourcePartition, copy_offset
from drkit.records import TopicPartition
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    fill,
    progress_of,
    source_with_groups,
    wait_replicated,
)
from tests.integration.test_monitor import FAST_HEALTH
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, wait_until


def three_clusters(
    tmp_path: Path,
    source: ClusterUnderTest,
    near: ClusterUnderTest,
    far: ClusterUnderTest,
    exactly_once: bool = False,
    repoint_in_run: bool = True,
) -> tuple[FlowSetup, FlowSetup]:
    """The config ``drkit local up --clusters SRC,NEAR,FAR`` writes for these clusters (a flow
    from the first to each of the others: every topic, every group), with a monitor's fast
    health and automation on (any RPO accepted, so both standbys' decisions act and the choice
    decides); the two flows as FlowSetups (each sees its own flow first, for
    tests.failover_support's helpers).  ``exactly_once``: both flows in transactions.
    ``repoint_in_run`` False: the failover runbook without ``hold_standby_flows`` and
    ``follow_standbys`` (the far standby left for ``drkit flows repoint``, as when the run
    could not re-point it - the command's own tests)."""
    tag = uuid.uuid4().hex[:6]
    src, a, b = f"s{tag}", f"near{tag}", f"far{tag}"
    written = write_local_config(
        tmp_path,
        [ClusterStatus(alias, cluster.bootstrap_servers, ())
         for alias, cluster in ((src, source), (a, near), (b, far))],
    )  # fmt: skip
    document = yaml.safe_load(written.read_text())
    assert [(f["source"], f["target"]) for f in document["flows"]] == [(src, a), (src, b)]
    for flow in document["flows"]:
        flow["exactly_once"] = exactly_once
    document["health"] = FAST_HEALTH["health"]
    document["failover"] = {
        "automatic": True,
        "allow_single_observer": True,
        "accept_any_rpo": True,
        "after_s": 3.0,
    }
    if not repoint_in_run:
        document["failover"]["runbooks_dir"] = str(_without_repoint(tmp_path))
    path = tmp_path / f"drkit-{tag}.yaml"
    path.write_text(yaml.safe_dump(document))
    config = load_config(path)
    assert config.state_store.url is not None
    assert config.state_store.url.get_secret_value() == store_url(tmp_path)
    near_flow, far_flow = config.flows
    return (
        FlowSetup(path, config, src, a),
        FlowSetup(path, config.model_copy(update={"flows": (far_flow, near_flow)}), src, b),
    )


def _without_repoint(tmp_path: Path) -> Path:
    """A copy of the shipped runbooks whose failover leaves the other standbys alone."""
    shipped = Path(__file__).resolve().parents[1] / "runbooks"
    copied = tmp_path / "runbooks-without-repoint"
    shutil.copytree(shipped, copied, dirs_exist_ok=True)
    failover = copied / "failover.yaml"
    document = yaml.safe_load(failover.read_text())
    left = ("hold_standby_flows", "follow_standbys")
    document["steps"] = [s for s in document["steps"] if s["name"] not in left]
    failover.write_text(yaml.safe_dump(document))
    return copied


def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'drkit.db'}"


def replica_of(setup: FlowSetup, topic: str) -> str:
    return FlowTopology.of(setup.config.flows[0]).target_topic(topic)


def far_behind(
    tmp_path: Path,
    source: ClusterUnderTest,
    near: ClusterUnderTest,
    far: ClusterUnderTest,
    topic: str,
    names: Names,
    more: int,
    exactly_once: bool = False,
    repoint_in_run: bool = True,
) -> tuple[FlowSetup, FlowSetup]:
    """``topic`` (with groups) on ``source`` replicated to both standbys, then ``more`` records
    per partition that only the near one copies (the far one's worker stopped), then the source
    killed: the estate a re-point starts from.  The two flows, as :func:`three_clusters`."""
    near_flow, far_flow = three_clusters(tmp_path, source, near, far, exactly_once, repoint_in_run)
    source_with_groups(near_flow, topic, names)
    with Replicator(near_flow, log_dir=tmp_path):  # both flows
        wait_replicated(near_flow, topic)
        wait_replicated(far_flow, topic)
    fill(near_flow.source_endpoint, topic, more, start=PER_PARTITION)
    with Replicator(near_flow, "--flow", near_flow.config.flows[0].name, log_dir=tmp_path):
        wait_until(
            lambda: all(
                progress_of(near_flow).get(TopicPartition(topic, p)) == PER_PARTITION + more
                for p in range(PARTITIONS)
            ),
            60,
            what="the near standby copying the rest",
        )
    assert source.local is not None
    source.local.kill_broker(source.name)
    return near_flow, far_flow


def copies_on(setup: FlowSetup, topic: str, replica: str) -> dict[int, list[tuple[int, int]]]:
    """Per partition, the (origin offset, position) of every copy ``setup``'s replica holds,
    read_committed, in position order."""
    tps = [TopicPartition(replica, p) for p in range(PARTITIONS)]
    ends = KafkaAdmin(setup.target_endpoint).list_offsets(tps, "latest")
    out: dict[int, list[tuple[int, int]]] = {}
    for tp in tps:
        origin = SourcePartition(setup.source, TopicPartition(topic, tp.partition))
        records = consume_ranges(setup.target_endpoint, {tp: (0, ends[tp])}, 60.0)
        found = ((copy_offset(r, origin), r.offset) for r in records)
        out[tp.partition] = [(o, at) for o, at in found if o is not None]
    return out
