"""A SparkSession with Spark's own Kafka connector, quiet logs and a progress bar."""

from __future__ import annotations

import os
import re
import socket
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from drkit.config.discovery import cache_dir
from drkit.errors import AccountingError, ExitCode
from drkit.local.jars import resolve_bundle

SPARK_MASTER_PORT = 7077  # a standalone master's default
MASTER_CHECK_S = 3.0  # a master that takes no TCP connection in this long: unreachable


class SparkMasterUnreachable(AccountingError):
    """A spark:// master takes no TCP connection: exit 3 (a cluster down), before Spark is
    started - Spark itself gives up only after its retries (~80 s)."""

    exit_code = ExitCode.UNHEALTHY


def require_spark_master(master: str | None, timeout_s: float = MASTER_CHECK_S) -> None:
    """Raise :class:`SparkMasterUnreachable` when ``master`` is a standalone master URL
    (``spark://HOST:PORT``, or ``spark://H1:P1,H2:P2`` for standby masters) none of whose
    masters accepts a TCP connection within ``timeout_s``; other masters are not checked."""
    if master is None or not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        parts = urlsplit(f"//{address}")
        try:
            host, port = parts.hostname or "", parts.port or SPARK_MASTER_PORT
        except ValueError as err:  # a port that is no number
            errors.append(f"{address}: {err}")
            continue
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as err:
            errors.append(f"{address}: {err.strerror or err}")
    raise SparkMasterUnreachable(
        f"Spark master {master} is unreachable ({'; '.join(errors)}); nothing was started"
    )


# Spark's own protections for what the driver sends its executors (tasks carry the Kafka
# client settings, credentials included).
_TRANSPORT_SECURITY = ("spark.authenticate", "spark.network.crypto.enabled")


def transport_warning(master: str | None, conf: Mapping[str, str]) -> str | None:
    """Why the job's Kafka credentials would cross the network unprotected, or None: a
    ``spark://`` master (any of its standbys) off loopback, with Spark's authentication or RPC
    encryption not on in ``conf`` (the session's settings, spark-defaults.conf included)."""
    from drkit.listening import is_loopback

    if master is None or not master.startswith("spark://"):
        return None
    addresses = master.removeprefix("spark://").split(",")
    if all(is_loopback(urlsplit(f"//{address}").hostname or "") for address in addresses):
        return None
    off = [key for key in _TRANSPORT_SECURITY if conf.get(key, "false").lower() != "true"]
    if not off:
        return None
    return (
        f"Spark master {master}: {', '.join(off)} not true - the job's tasks carry the Kafka "
        "credentials to the executors unauthenticated or in clear; set them (and "
        "spark.authenticate.secret) in $SPARK_CONF_DIR/spark-defaults.conf, mode 0600"
    )


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark prints "Setting default log level" unless the logger it starts with has its own level.
logger.spark.name = org.apache.spark
logger.spark.level = error
"""


def _artifact(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[^/]*\.jar$", "", jar.name)


def connector_jars() -> list[str]:
    """spark-sql-kafka-0-10 for the installed pyspark plus the dependencies pyspark lacks.

    Jars pyspark already ships (Scala, Hadoop client, slf4j, lz4, ...) are left out so the
    classpath never holds two versions of one library.
    """
    import pyspark

    directory = resolve_bundle("spark-kafka", pyspark.__version__)
    bundled = {_artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(jar) for jar in directory.glob("*.jar") if _artifact(jar) not in bundled)


def spark_jvm_options() -> str:
    """Extra JVM flags (``DRKIT_SPARK_JVM_OPTIONS``) for every Spark JVM drkit starts: the
    driver, the executors, the standalone daemons, with room for the JIT's code kept (see
    `with_code_cache_room`).  The tests set ``-XX:TieredStopAtLevel=1``: a short job on a cold
    JVM then starts ~13 s sooner on two cores (drkit verify of 2,000 records: 54 -> 41 s;
    200,000: 52 -> 47 s)."""
    return with_code_cache_room(os.environ.get("DRKIT_SPARK_JVM_OPTIONS", ""))


# HotSpot's default reservation with its full JIT; only the pages used are committed.
CODE_CACHE_ROOM = "-XX:ReservedCodeCacheSize=240m"
_QUICK_JIT_ONLY = ("-XX:TieredStopAtLevel=", "-XX:-TieredCompilation")


def with_code_cache_room(options: str) -> str:
    """``options`` plus `CODE_CACHE_ROOM` when they limit the JIT and reserve no code cache.

    With the quick JIT only, HotSpot shrinks its code cache reservation from 240 MB to 48 MB.
    A driver that lives through many jobs (a test process, a scheduler running verify) keeps
    compiling Spark's generated classes, fills those 48 MB, and its next task fails with
    "Out of space in CodeCache for adapters" (seen in CI: a test process's ~20th job).
    """
    flags = options.split()
    limits_jit = any(flag.startswith(_QUICK_JIT_ONLY) for flag in flags)
    sized = any(flag.startswith("-XX:ReservedCodeCacheSize=") for flag in flags)
    return f"{options} {CODE_CACHE_ROOM}".strip() if limits_jit and not sized else options


def build_session(
    master: str | None, app_name: str, verbose: bool = False, java_properties: str = ""
) -> Any:
    """A session for ``master`` (default ``local[*]``), connector jars on its classpath;
    ``java_properties`` (``-Dkey=value ...``) for the driver's and executors' JVMs."""
    from pyspark.sql import SparkSession

    # Executors run the same interpreter (and therefore the same pyspark) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log_config = cache_dir() / "spark-log4j2.properties"
    log_config.parent.mkdir(parents=True, exist_ok=True)
    log_config.write_text(_LOG4J2)
    java_options = "" if verbose else f"-Dlog4j2.configurationFile=file:{log_config}"
    java_options = f"{java_options} {java_properties} {spark_jvm_options()}".strip()
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or "local[*]")
        .config("spark.jars", ",".join(connector_jars()))
        # Spark's own progress bar would fight drkit's lines (and fill log files): drkit
        # reports progress itself.
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "16")
        .config("spark.driver.memory", os.environ.get("DRKIT_SPARK_DRIVER_MEMORY", "1g"))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.session.timeZone", "UTC")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("INFO" if verbose else "ERROR")
    return spark


def job_file() -> Path:
    """The job script, for spark-submit on a cluster."""
    return Path(__file__).with_name("job.py")


JOB_ARCHIVE = "drkit-accounting-job.zip"


def job_archive(directory: Path) -> Path:
    """Write the zip spark-submit ships with ``--py-files``: the job's stage package
    (drkit/accounting/sparkjob) with its two parent ``__init__`` files, nothing else of drkit.

    On the driver and the executors it comes first on the Python path, so the job runs the
    same code whether or not drkit is installed there.
    """
    accounting = Path(__file__).parent
    root = accounting.parent.parent
    members = [
        accounting.parent / "__init__.py",
        accounting / "__init__.py",
        *sorted((accounting / "sparkjob").glob("*.py")),
    ]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / JOB_ARCHIVE
    partial = path.with_name(f".{path.name}.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in members:
            archive.write(member, member.relative_to(root).as_posix())
    partial.replace(path)
    return path
