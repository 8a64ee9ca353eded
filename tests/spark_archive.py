"""A class-data-sharing archive of Spark's classes for the tests' Spark JVMs.

A Spark driver loads and verifies some 15,000 classes before it runs a job; a JVM can map them
from an archive instead (Java's dynamic CDS, as drkit/local/class_archive.py does for the
brokers).  Measured on 2026-12-06 (a local session counting 200,000 rows, JVM CPU of the
whole run): 5.9-6.5 CPU-s without, 3.4-3.7 with; recording the archive once costs ~20 CPU-s.
The suite starts a dozen Spark drivers (drkit verify, the drills' proofs, the demo).

The archive lives in drkit's cache beside the jars (it outlives a clone, like them), named for
the Java runtime and pyspark's jars.  It is recorded once, by whichever test process gets the
lock first: a tiny session whose JVM dumps its classes on exit, then a JVM that must map the
recording (``-Xshare:on``) before it is renamed into place - a torn or foreign file never
becomes the archive.  JVMs whose class path differs (Spark's standalone daemons, executors)
ignore it; the CDS warnings that would say so on stdout (where ``drkit verify -o json`` writes
its document) are turned off.  ``DRKIT_TEST_SPARK_ARCHIVE=off`` leaves it out.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

SWITCH = "DRKIT_TEST_SPARK_ARCHIVE"
# Turn the JVM's logging off but for errors, on stderr: a class path that does not match the
# archive's is a warning on stdout otherwise.
QUIET = "-Xlog:disable -Xlog:all=error:stderr"
_JOB = (
    "import sys; from pyspark import SparkContext; "
    "from drkit.accounting.session import build_session; "
    "s = build_session(None, 'drkit-test-class-archive'); "
    "s.range(200000).selectExpr('id % 7 as k').groupBy('k').count().collect(); "
    "proc = SparkContext._gateway.proc; s.stop(); SparkContext._gateway.shutdown(); "
    "proc.stdin.close(); sys.exit(proc.wait(300))"
)


def enabled() -> bool:
    return os.environ.get(SWITCH, "").strip().lower() not in {"off", "0", "false", "no"}


def archive_path() -> Path | None:
    """Where the archive for this Java runtime and pyspark lives (None: no java or pyspark)."""
    java = shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    binary = Path(java).resolve()
    jars = Path(pyspark.__file__).parent / "jars"
    stat = binary.stat()
    identity = f"{binary}:{stat.st_size}:{stat.st_mtime_ns}:{pyspark.__version__}:" + ",".join(
        sorted(p.name for p in jars.glob("*.jar"))
    )
    from drkit.config.discovery import cache_dir

    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return cache_dir() / f"spark-{pyspark.__version__}.classes-{key}.jsa"


def _run(options: str) -> bool:
    environment = {**os.environ, "DRKIT_SPARK_JVM_OPTIONS": options}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _JOB],
            env=environment,
            capture_output=True,
            timeout=600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def ensure(base_options: str) -> Path | None:
    """The archive (recorded now when there is none); None when it cannot be had."""
    path = archive_path() if enabled() else None
    if path is None:
        return None
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be recording it
        if path.exists():
            return path
        recording = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
        try:
            recorded = _run(f"{base_options} -XX:ArchiveClassesAtExit={recording}")
            if not (recorded and recording.exists()):
                return None
            if not _run(f"{base_options} -Xshare:on -XX:SharedArchiveFile={recording} {QUIET}"):
                return None
            recording.replace(path)
        finally:
            recording.unlink(missing_ok=True)
    return path


def flags(archive: Path) -> str:
    return f"-XX:SharedArchiveFile={archive} {QUIET}"
