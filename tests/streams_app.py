"""A real Kafka Streams application (tests/java/StreamsCount.java, Kafka's own library from
Maven Central): counts the records of a topic per key, exactly once, in a store restored from
its changelog on every start."""

from __future__ import annotations

import struct
import subprocess
import time
from pathlib import Path

from drkit.kafka import ClusterEndpoint
from drkit.kafka.io import consume_all
from drkit.local.jars import java_executable, resolve_bundle
from tests.processes import stop_gracefully

SOURCE = Path(__file__).resolve().parent / "java" / "StreamsCount.java"
STORE = "counts"


def changelog_topic(application_id: str) -> str:
    """The name Kafka Streams gives the store's changelog (it looks for exactly this one)."""
    return f"{application_id}-{STORE}-changelog"


def counts_in_changelog(endpoint: ClusterEndpoint, application_id: str) -> dict[str, int]:
    """The store's state as its changelog on ``endpoint`` holds it: the last count per key."""
    counts: dict[str, int] = {}
    for record in consume_all(endpoint, changelog_topic(application_id), timeout_s=30):
        if record.key is not None and record.value is not None:
            (counts[record.key.decode()],) = struct.unpack(">q", record.value)
    return counts


class StreamsCountApp:
    """The application, started with ``with`` on ``bootstrap`` reading ``input_topic`` as
    ``application_id``; stopped by SIGTERM (it closes and commits) when the block ends."""

    def __init__(
        self, bootstrap: str, application_id: str, input_topic: str, workdir: Path, label: str
    ) -> None:
        self.args = [bootstrap, application_id, input_topic, str(workdir / f"state-{label}")]
        self.workdir = workdir
        self.log_path = workdir / f"streams-{label}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def _classes(self) -> tuple[Path, Path]:
        jars = resolve_bundle("kafka-streams")
        classes = self.workdir / "streams-classes"
        if not (classes / "StreamsCount.class").exists():
            classes.mkdir(exist_ok=True)
            javac = str(Path(java_executable()).with_name("javac"))
            subprocess.run(
                [javac, "-cp", f"{jars}/*", "-d", str(classes), str(SOURCE)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        return jars, classes

    def __enter__(self) -> StreamsCountApp:
        jars, classes = self._classes()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [java_executable(), "-Xmx256M", "-cp", f"{classes}:{jars}/*", "StreamsCount",
                 *self.args],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def wait_running(self, timeout_s: float = 90) -> None:
        """Until the application reports RUNNING (its state restored, processing)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the Streams application exited:\n{self.log()}")
            if "STATE RUNNING" in self.log():
                return
            time.sleep(0.3)
        raise AssertionError(f"the Streams application is not RUNNING after {timeout_s} s")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_gracefully(self.process, 40)

    def __exit__(self, *_exc: object) -> None:
        self.stop()
