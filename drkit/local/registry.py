"""A local Apicurio Registry (2.x, in-memory storage) from Maven Central, on loopback.

What drkit's schema tests run against (a real registry, through the same Confluent-compatible
API applications use); started like the local brokers: a Java process from a cached
distribution.  In-memory storage: a stopped registry forgets everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from drkit.errors import LocalClusterError
from drkit.local.jars import java_executable, resolve_distribution
from drkit.local.ports import free_port

APICURIO_VERSION = "2.6.13.Final"
_COORDINATE = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:zip:all"


def ccompat_url(port: int) -> str:
    """The Confluent-compatible API's root of a local registry on ``port``."""
    return f"http://127.0.0.1:{port}/apis/ccompat/v7"


def registry_runner() -> Path:
    """The registry's runnable jar (its libraries beside it), fetched on first use."""
    home = resolve_distribution(_COORDINATE, f"apicurio-registry-{APICURIO_VERSION}")
    runners = sorted(home.glob("**/*-runner.jar"))
    if not runners:
        raise LocalClusterError(f"no *-runner.jar in {home}: delete it to fetch it again")
    return runners[0]


class LocalRegistry:
    """One registry on ``127.0.0.1:port``; a context manager that stops it (SIGTERM)."""

    def __init__(self, port: int, log_path: Path) -> None:
        self.port = port
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's root (what drkit's config and serializers take)."""
        return ccompat_url(self.port)

    def start(self) -> LocalRegistry:
        runner = registry_runner()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [java_executable(), "-Xmx256m", "-XX:TieredStopAtLevel=1",
                 f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1",
                 "-jar", str(runner)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Until the API answers; LocalClusterError (with the log's tail) otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LocalClusterError(f"the schema registry exited:\n{self._tail()}")
            if _answers(self.url):
                return
            time.sleep(0.5)
        raise LocalClusterError(
            f"the schema registry on port {self.port} did not answer in {timeout_s:g} s:\n"
            f"{self._tail()}"
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def _tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LocalRegistry:
        self.start()
        self.wait_ready()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/subjects", timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def _pid_is_registry(pid: int, port: int) -> bool:
    """``pid`` is alive and is the registry JVM started on ``port`` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"apicurio-registry" in cmdline and f"-Dquarkus.http.port={port}".encode() in cmdline


class LocalRegistries:
    """One registry per local cluster (``drkit local up --schema-registry``), recorded in
    ``<state dir>/local/<cluster>/registry.json`` so later commands find and stop them."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "local"

    def _record(self, name: str) -> Path:
        return self.root / name / "registry.json"

    def _running(self, name: str) -> tuple[int, int] | None:
        """(pid, port) of the cluster's registry when it runs."""
        try:
            raw = json.loads(self._record(name).read_text())
        except (OSError, ValueError):
            return None
        pid, port = int(raw["pid"]), int(raw["port"])
        return (pid, port) if _pid_is_registry(pid, port) else None

    def up(self, names: Iterable[str], timeout_s: float = 120.0) -> dict[str, str]:
        """Start the registries not running yet (running ones are kept); their URLs."""
        started: list[LocalRegistry] = []
        for name in names:
            if self._running(name) is not None:
                continue
            self._record(name).parent.mkdir(parents=True, exist_ok=True)
            registry = LocalRegistry(free_port(), self.root / name / "registry.log").start()
            self._record(name).write_text(json.dumps({"pid": registry.pid, "port": registry.port}))
            started.append(registry)
        for registry in started:
            registry.wait_ready(timeout_s)
        return self.urls()

    def urls(self) -> dict[str, str]:
        """The Confluent-compatible API of every running registry, by cluster."""
        out: dict[str, str] = {}
        for record in sorted(self.root.glob("*/registry.json")):
            running = self._running(record.parent.name)
            if running is not None:
                out[record.parent.name] = ccompat_url(running[1])
        return out

    def stop(self, name: str) -> bool:
        """Stop the cluster's registry (SIGTERM, then SIGKILL after 20 s); whether one ran."""
        running = self._running(name)
        if running is not None:
            _terminate(*running)
        self._record(name).unlink(missing_ok=True)
        return running is not None

    def down(self) -> list[str]:
        """Stop every recorded registry; the clusters' names whose registry was running."""
        names = sorted(record.parent.name for record in self.root.glob("*/registry.json"))
        return [name for name in names if self.stop(name)]


def _terminate(pid: int, port: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _pid_is_registry(pid, port):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    if _pid_is_registry(pid, port):
        os.kill(pid, signal.SIGKILL)
