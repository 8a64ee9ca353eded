"""Run MirrorMaker 2's RemoteClusterUtils (from Maven Central) against a cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

from drkit.local.jars import java_executable, resolve_bundle

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
