"""The RTO campaign's runner on real brokers (issue 50, target 4): one ``pause`` drill through
bench.rto's Campaign - the automatic failover, the source's brokers frozen - ends PolicyMet
with the whole RTO split measured, and leaves both clusters ready for the next run (thawed,
answering, no firewall rule of its own).  The source is a scratch cluster, the target the
shared dc2, as in test_drills."""

from __future__ import annotations

from pathlib import Path

from bench.rto import Campaign, scenario_for
from tests.kafka_backends import ClusterUnderTest


def test_a_pause_run_of_the_campaign_is_measured_whole_and_leaves_the_clusters_ready(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, tmp_path: Path
) -> None:
    assert scratch.local is not None  # the scratch fixture skips other backends
    scenario = scenario_for("pause").model_copy(update={"source": scratch.name, "target": dc2.name})
    campaign = Campaign(
        scratch.local,
        {scratch.name: scratch.bootstrap_servers, dc2.name: dc2.bootstrap_servers},
        tmp_path,
    )
    record = campaign.run("pause", 1, scenario)
    assert record.verdict == "PolicyMet", record
    assert record.rto is not None and "SIGSTOP" in record.how
    assert all(record.rto[part] >= 0 for part in ("detection_s", "decision_s"))
    assert record.rto["execution_s"] > 0 and record.rto["total_s"] > 0
    assert record.rpo_records is not None
    assert campaign.ready() is None
