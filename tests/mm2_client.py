"""Run MirrorMaker 2's RemoteClusterUtils (from Maven Central) against a cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

from drkit.local.jars import java_executable, resolve_bundle
from tests.processes import stop_gracefully

SOURCE = Path(__file__).resolve().parent / "java" / "Mm2Offsets.java"


def remote_consumer_offsets(
    bootstrap: str, remote_alias: str, group: str, workdir: Path
) -> dict[str, int]:
    """``{"topic-partition": offset}`` as MM2's client library translates ``group``."""
    jars = resolve_bundle("mirror-maker")
    classes = workdir / "mm2-classes"
    classes.mkdir(exist_ok=True)
    javac = str(Path(java_executable()).with_name("javac"))
    subprocess.run(
        [javac, "-cp", f"{jars}/*", "-d", str(classes), str(SOURCE)],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [
            java_executable(),
            "-cp",
            f"{classes}:{jars}/*",
            "Mm2Offsets",
            bootstrap,
            remote_alias,
            group,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out: dict[str, int] = {}
    for line in done.stdout.splitlines():
        if "=" in line:
            key, value = line.rsplit("=", 1)
            out[key] = int(value)
    return out


class MirrorMaker2:
    """A real MirrorMaker 2 (dedicated mode, Kafka's jars from Maven Central) replicating
    ``topic`` from ``source`` to ``target`` until the ``with`` block ends (SIGTERM, then
    SIGKILL after 30 s).  ``offset.lag.max`` is small so that its offset syncs are sparse but
    several; heartbeats it would write into the shared target are off."""

    def __init__(
        self,
        aliases: tuple[str, str],
        bootstraps: tuple[str, str],
        topic: str,
        workdir: Path,
        offset_lag_max: int = 40,
    ) -> None:
        (self.source, self.target), (source_bootstrap, target_bootstrap) = aliases, bootstraps
        flow = f"{self.source}->{self.target}"
        lines = [
            f"clusters={self.source},{self.target}",
            f"{self.source}.bootstrap.servers={source_bootstrap}",
            f"{self.target}.bootstrap.servers={target_bootstrap}",
            f"{flow}.enabled=true",
            f"{flow}.topics={topic}",
            f"{self.target}->{self.source}.enabled=false",
            f"{flow}.emit.heartbeats.enabled=false",
            f"{flow}.offset.lag.max={offset_lag_max}",
            f"{flow}.emit.checkpoints.interval.seconds=1",
            f"{flow}.refresh.groups.interval.seconds=2",
            f"{flow}.sync.topic.acls.enabled=false",
            "tasks.max=1",
            "replication.factor=1",
        ]
        internal = ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic",
                    "offset.storage", "status.storage", "config.storage")  # fmt: skip
        lines += [f"{name}.replication.factor=1" for name in internal]
        self.properties = workdir / f"mm2-{self.source}.properties"
        self.properties.write_text("\n".join(lines) + "\n")
        self.log_path = workdir / f"mm2-{self.source}.log"
        self.log4j = workdir / "mm2-log4j2.properties"
        self.log4j.write_text(
            "rootLogger.level = WARN\nrootLogger.appenderRef.c.ref = c\n"
            "appender.c.type = Console\nappender.c.name = c\n"
            "appender.c.layout.type = PatternLayout\nappender.c.layout.pattern = %d %p %c %m%n\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MirrorMaker2:
        jars = resolve_bundle("mirror-maker")
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    java_executable(), "-Xms64M", "-Xmx512M",
                    f"-Dlog4j2.configurationFile={self.log4j}",
                    "-cp", f"{jars}/*", "org.apache.kafka.connect.mirror.MirrorMaker",
                    str(self.properties), "--clusters", self.target,
                ],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def stop(self) -> None:
        stop_gracefully(self.process, 30)

    def __exit__(self, *_exc: object) -> None:
        self.stop()
