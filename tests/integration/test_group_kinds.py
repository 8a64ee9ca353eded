"""Groups that are not consumer groups, on real brokers: a KIP-932 share group consuming a
flow's topic is named in every failover plan as not moved - never dropped without a word."""

from __future__ import annotations

import subprocess
from pathlib import Path

from drkit.kafka.admin import TopicSpec
from drkit.local.jars import java_executable, resolve_bundle
from tests.conftest import Names
from tests.failover_support import drkit
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import flow_setup, wait_until


def _kafka_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    jars = resolve_bundle("kafka")
    return subprocess.run(
        [java_executable(), "-cp", f"{jars}/*", main_class, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_share_group_is_named_in_the_plan_as_not_moved(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    # Kafka 4.1 ships share groups behind a feature flag; finalizing it changes nothing else.
    feature = ("upgrade", "--feature", "share.version=1")
    enabled = _kafka_tool(
        "org.apache.kafka.tools.FeatureCommand",
        "--bootstrap-server",
        dc1.bootstrap_servers,
        *feature,
    )
    assert enabled.returncode == 0, enabled.stdout + enabled.stderr
    topic = names.topic("jobs")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], groups={"include": [f"{names.prefix}.*"]})
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    share_group = names.group("workers")
    jars = resolve_bundle("kafka")
    consumer = subprocess.Popen(
        [java_executable(), "-cp", f"{jars}/*",
         "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
         "--bootstrap-server", dc1.bootstrap_servers, "--topic", topic, "--group", share_group],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: share_group in dc1.admin().other_groups(), 60, 0.5,
                   what="the share group exists")  # fmt: skip
        assert share_group not in dc1.admin().list_groups()  # not a consumer group
        done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--plan",
                     "-o", "json")  # fmt: skip
    finally:
        consumer.terminate()
        consumer.wait(timeout=30)
    plan = done.json()
    warning = next(w for w in plan["warnings"] if w["code"] == "untranslatable_groups")
    assert share_group in warning["message"], warning
    assert share_group not in {g["group"] for g in plan["groups"]}
