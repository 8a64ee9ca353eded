"""A local Apicurio Registry (2.x, in-memory storage) from Maven Central, on loopback.

What drkit's schema tests run against (a real registry, through the same Confluent-compatible
API applications use); started like the local brokers: a Java process from a cached
distribution.  In-memory storage: a stopped registry forgets everything.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from drkit.errors import LocalClusterError
from drkit.local.jars import java_executable, resolve_distribution

APICURIO_VERSION = "2.6.13.Final"
_COORDINATE = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:zip:all"


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
    def url(self) -> str:
        """The Confluent-compatible API's root (what drkit's config and serializers take)."""
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

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
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
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
