"""Helpers for replication integration tests: per-test configs and real worker processes.

Every test gets its own cluster aliases (``s<id>`` → dc1, ``t<id>`` → dc2), so consumer groups,
progress, offset-sync topics and replica names never collide between tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import yaml

from drkit.config import load_config
from drkit.config.model import DrkitConfig
from drkit.kafka import ClusterEndpoint
from tests.kafka_backends import ClusterUnderTest


def wait_until(
    predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.25, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what or predicate} ({last!r})")


@dataclass
class FlowSetup:
    """A two-cluster config for one test."""

    path: Path
    config: DrkitConfig
    source: str
    target: str
    extra_flows: list[dict[str, Any]] = field(default_factory=list)

    def endpoint(self, alias: str) -> ClusterEndpoint:
        return ClusterEndpoint(alias, self.config.clusters[alias])

    @property
    def source_endpoint(self) -> ClusterEndpoint:
        return self.endpoint(self.source)

    @property
    def target_endpoint(self) -> ClusterEndpoint:
        return self.endpoint(self.target)


def flow_setup(
    tmp_path: Path,
    source: ClusterUnderTest,
    target: ClusterUnderTest,
    topics: list[str],
    reverse: bool = False,
    document_extra: dict[str, Any] | None = None,
    **flow: Any,
) -> FlowSetup:
    """Write a config replicating ``topics`` (regexes) from ``source`` to ``target``."""
    tag = uuid.uuid4().hex[:6]
    src, dst = f"s{tag}", f"t{tag}"
    flows = [{"source": src, "target": dst, "topics": {"include": topics}, **flow}]
    if reverse:
        flows.append({"source": dst, "target": src, "topics": {"include": topics}, **flow})
    document = {
        "clusters": {
            src: {"bootstrap_servers": source.bootstrap_servers},
            dst: {"bootstrap_servers": target.bootstrap_servers},
        },
        "flows": flows,
        "state_store": {"url": f"sqlite:///{tmp_path / 'drkit.db'}"},
        **(document_extra or {}),
    }
    path = tmp_path / f"drkit-{tag}.yaml"
    path.write_text(yaml.safe_dump(document))
    return FlowSetup(path, load_config(path), src, dst)


class DrkitProcess:
    """A ``python -m drkit ...`` child process (so tests can SIGTERM or SIGKILL it).

    Every instance is remembered; the ``reap_replicators`` fixture kills leftovers after each
    test so a failed assertion never leaves a process running into the next test.
    """

    started: ClassVar[list[DrkitProcess]] = []

    def __init__(self, args: list[str], log_dir: Path, label: str = "drkit") -> None:
        self.command = [sys.executable, "-m", "drkit", *args]
        self.log_path = log_dir / f"{label}-{uuid.uuid4().hex[:6]}.log"
        self.process: subprocess.Popen[bytes] | None = None
        DrkitProcess.started.append(self)

    @classmethod
    def reap(cls) -> None:
        for worker in cls.started:
            if worker.running:
                worker.kill()
        cls.started.clear()

    def start(self) -> DrkitProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self

    def stop(self, timeout_s: float = 60.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout_s)

    def kill(self) -> None:
        """kill -9 the process (and its children, for --workers N)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout_s)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.running:
            try:
                self.stop(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Replicator(DrkitProcess):
    """``drkit replicate`` for one test's flow config."""

    def __init__(self, setup: FlowSetup, *args: str, log_dir: Path) -> None:
        super().__init__(
            ["replicate", "--config", str(setup.path), "--commit-interval", "0.5", *args],
            log_dir,
            "replicate",
        )
        self.setup = setup

    def start(self) -> Replicator:
        super().start()
        return self

    def __enter__(self) -> Self:
        self.start()
        return self
