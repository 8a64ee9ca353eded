"""A class-data-sharing archive of the broker's classes, so local brokers start on less CPU.

A Kafka broker loads and verifies some 6,000 classes before it answers; a JVM can map them from
an archive instead (Java's dynamic CDS: ``-XX:ArchiveClassesAtExit`` records one when a JVM
exits, ``-XX:SharedArchiveFile`` maps it).  Measured on this project's machines
(bench/RESULTS.md): a single-broker cluster reached "ready" on ~1.0 CPU-s instead of ~1.5-1.9,
and formatted on ~0.45 instead of ~0.6.  The demo, the drills and the test suite start dozens of
brokers.

The lifecycle, all on disk so any number of ``LocalKafka`` instances (processes) share it:

* no archive yet: a broker started records one into its own directory (:func:`recording_of`);
* that broker stopped gracefully (SIGTERM: the JVM dumps the archive as it exits): the
  recording is checked by a JVM that must map it (``-Xshare:on``; a truncated or foreign file
  is refused) and only then linked to its shared name - a broker killed mid-dump leaves a file
  that never becomes the archive;
* every later broker and format run maps the archive.

The shared name carries the Java runtime it was made by (path, size, modification time of the
``java`` binary) and sits beside the jars it holds, so a JDK or Kafka upgrade records a new one.
``DRKIT_KAFKA_CLASS_ARCHIVE=off`` turns all of it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

ARCHIVE_SWITCH = "DRKIT_KAFKA_CLASS_ARCHIVE"
# The JVM flags the archive is recorded and checked with: a GC other than the one it was made
# under makes the JVM refuse it.
GC_FLAGS = ("-XX:+UseG1GC",)
_CHECK_TIMEOUT_S = 60.0


def enabled() -> bool:
    return os.environ.get(ARCHIVE_SWITCH, "").strip().lower() not in {"off", "0", "false", "no"}


def archive_of(jars: Path, java: str) -> Path:
    """Where the archive for these jars and this Java runtime lives (it may not exist)."""
    binary = Path(java).resolve()
    try:
        stat = binary.stat()
        identity = f"{binary}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        identity = str(binary)
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return jars.parent / f"{jars.name}.broker-classes-{key}.jsa"


def recording_of(broker_dir: Path) -> Path:
    """Where a broker started without an archive records one (its own directory: no race)."""
    return broker_dir / "broker-classes.jsa"


def broker_flags(jars: Path, java: str, broker_dir: Path) -> list[str]:
    """The class-archive flags of a broker's JVM: map the archive, or record one."""
    if not enabled():
        return []
    archive = archive_of(jars, java)
    if archive.exists():
        return [f"-XX:SharedArchiveFile={archive}"]
    return [f"-XX:ArchiveClassesAtExit={recording_of(broker_dir)}"]


def tool_flags(jars: Path, java: str) -> list[str]:
    """The flags of a short JVM over the same jars (the storage format tool): map the
    archive when there is one, never record."""
    archive = archive_of(jars, java)
    return [f"-XX:SharedArchiveFile={archive}"] if enabled() and archive.exists() else []


def keep_recording(jars: Path, java: str, broker_dir: Path) -> bool:
    """After the broker of ``broker_dir`` exited: make its recording the shared archive when
    a JVM maps it, else drop it.  Whether an archive was kept.  Never raises: without an
    archive brokers start as they always did."""
    recording = recording_of(broker_dir)
    if not recording.exists():
        return False
    archive = archive_of(jars, java)
    try:
        if not archive.exists() and _maps(java, jars, recording):
            with contextlib.suppress(FileExistsError):  # another broker's came first
                os.link(recording, archive)
            log.info("broker class archive kept", extra={"archive": str(archive)})
            return True
        return False
    except OSError as err:
        log.warning("broker class archive not kept", extra={"error": str(err)})
        return False
    finally:
        with contextlib.suppress(OSError):
            recording.unlink()


def _maps(java: str, jars: Path, recording: Path) -> bool:
    """Whether a JVM over ``jars`` maps ``recording`` (``-Xshare:on`` fails when it cannot; a
    torn file crashes it - its crash report and working directory are the recording's
    directory, never the caller's)."""
    command = [
        java,
        *GC_FLAGS,
        f"-XX:ErrorFile={recording.parent / 'class-archive-check-%p.log'}",
        "-XX:-CreateCoredumpOnCrash",
        "-Xshare:on",
        f"-XX:SharedArchiveFile={recording}",
        "-cp",
        f"{jars}/*",
        "-version",
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            timeout=_CHECK_TIMEOUT_S,
            check=False,
            cwd=recording.parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
