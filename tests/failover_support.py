"""Helpers for failover acceptance tests: run drkit commands, read groups back by provenance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.io import consume_ranges
from drkit.kafka.records import TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from tests.replication_support import FlowSetup


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.out)
        return document


def drkit(setup: FlowSetup, *args: str, timeout_s: float = 180.0) -> Done:
    """``drkit --state-dir <tmp>/state ARGS --config <setup>`` as a child process."""
    state = setup.path.parent / "state"
    command = [sys.executable, "-m", "drkit", "--state-dir", str(state), *args]
    command += ["--config", str(setup.path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, check=False, env=env
    )
    return Done(done.returncode, done.stdout, done.stderr)


def with_config(setup: FlowSetup, **sections: Any) -> FlowSetup:
    """Rewrite the setup's config file with extra top-level sections (e.g. failover)."""
    document = yaml.safe_load(setup.path.read_text())
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            document[key] = {**document[key], **value}
        else:
            document[key] = value
    setup.path.write_text(yaml.safe_dump(document))
    return setup


def resumes_at(
    endpoint: ClusterEndpoint, committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """Per target partition: the source offset (provenance) of the first record a consumer
    at the committed offset reads there, or None when it reads nothing (at the end)."""
    admin = KafkaAdmin(endpoint)
    ends = admin.list_offsets(list(committed), "latest")
    out: dict[TopicPartition, int | None] = {}
    for tp, offset in committed.items():
        first = next(iter(consume_ranges(endpoint, {tp: (offset, ends[tp])}, 30.0)), None)
        out[tp] = (
            Provenance.decode(first.header(SOURCE_HEADER) or b"").offset
            if first is not None
            else None
        )
    return out


def read_from(
    endpoint: ClusterEndpoint, committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, list[int]]:
    """Every source offset (provenance) a consumer starting at ``committed`` reads, in order."""
    admin = KafkaAdmin(endpoint)
    ends = admin.list_offsets(list(committed), "latest")
    out: dict[TopicPartition, list[int]] = {}
    for tp, offset in committed.items():
        out[tp] = [
            Provenance.decode(r.header(SOURCE_HEADER) or b"").offset
            for r in consume_ranges(endpoint, {tp: (offset, ends[tp])}, 60.0)
        ]
    return out
