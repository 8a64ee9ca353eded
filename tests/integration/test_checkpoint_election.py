"""One checkpoint worker per flow at a time, whichever process holds it: with ``--workers 2``
the elected worker is frozen (alive, silent - so nobody restarts it) and checkpoints go on from
the other one once the group coordinator gives up on the frozen member."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from drkit.kafka.io import commit_group_offsets
from drkit.records import TopicPartition
from tests.conftest import Names
from tests.failover_support import PARTITIONS, checkpointed, source_with_groups, wait_replicated
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until


def _elected_pid(replicator: Replicator) -> tuple[str, int]:
    """(worker id, pid) of the worker that says it was elected last."""
    log = replicator.log()
    member = re.findall(r"(?<!longer )\belected\s.*?member=(\S+)", log)[-1]
    index = member.rsplit("-", 1)[-1]
    pid = re.findall(rf"worker started\s.*?index={index}\s.*?pid=(\d+)", log)[-1]
    return member, int(pid)


def _settled(replicator: Replicator) -> bool:
    before = _elected_pid(replicator)
    time.sleep(3)
    return _elected_pid(replicator) == before


def test_checkpoints_go_on_when_the_elected_worker_hangs(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    pattern = f"{names.prefix}.*"
    setup = flow_setup(tmp_path, dc1, dc2, [pattern], groups={"include": [pattern]})
    groups = source_with_groups(setup, topic, names)
    group = names.group("middle")
    with Replicator(setup, "--workers", "2", log_dir=tmp_path) as replicator:
        wait_replicated(setup, topic, groups)
        wait_until(lambda: "elected" in replicator.log(), 30, what="an elected worker")
        # Both workers joined the election group by now; the leader no longer changes.
        wait_until(lambda: _settled(replicator), 30, what="a settled election")
        member, pid = _elected_pid(replicator)
        os.kill(pid, signal.SIGSTOP)
        try:
            moved = {TopicPartition(topic, p): 300 for p in range(PARTITIONS)}
            commit_group_offsets(setup.source_endpoint, group, moved)
            wait_until(lambda: checkpointed(setup, {group: moved}), 60,
                       what="a checkpoint written by the other worker")  # fmt: skip
            other, _ = _elected_pid(replicator)
            assert other != member
        finally:
            os.kill(pid, signal.SIGCONT)
