"""The config ``drkit local up`` writes for more than two clusters (issue 48 item 1)."""

from __future__ import annotations

from pathlib import Path

from drkit.config.loader import load_config
from drkit.local.cluster import ClusterStatus
from drkit.local.config_writer import write_local_config


def _clusters(*names: str) -> list[ClusterStatus]:
    return [ClusterStatus(name, f"127.0.0.1:{i + 1}", ()) for i, name in enumerate(names)]


def test_three_clusters_replicate_the_first_to_each_of_the_others(tmp_path: Path) -> None:
    config = load_config(write_local_config(tmp_path, _clusters("dc1", "dc2", "dc3")), env={})
    assert [(f.source, f.target) for f in config.flows] == [("dc1", "dc2"), ("dc1", "dc3")]
    assert {f.name for f in config.flows} == {"dc1->dc2", "dc1->dc3"}
    # Each flow as the two-cluster config writes its one flow: every topic and group.
    assert all(f.topics.include == (".*",) and f.groups.include == (".*",) for f in config.flows)


def test_a_registry_on_the_source_and_one_standby_syncs_that_flow_only(tmp_path: Path) -> None:
    urls = {dc: f"http://127.0.0.1:{port}/apis/ccompat/v7" for dc, port in (("dc1", 5), ("dc3", 6))}
    path = write_local_config(tmp_path, _clusters("dc1", "dc2", "dc3"), registries=urls)
    flows = {f.name: f for f in load_config(path, env={}).flows}
    assert not flows["dc1->dc2"].schema_sync.enabled
    assert flows["dc1->dc3"].schema_sync.enabled
