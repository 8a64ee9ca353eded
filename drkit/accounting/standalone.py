"""A Spark standalone cluster (one master, one worker) from pyspark's own distribution.

``drkit verify --spark-master spark://HOST:PORT`` runs the accounting job on any Spark
cluster.  This module starts the smallest real one on this machine - the same ``Master`` and
``Worker`` daemons a Spark deployment runs, launched with pyspark's ``bin/spark-class`` - so
the cluster path (driver and executors in separate JVMs, jars and Python functions shipped to
the executors) is exercised without a Spark installation: by the test suite, by
``python -m bench accounting --spark standalone``, and by anyone who wants to try it.

Invariants: both daemons listen on loopback only; :func:`standalone_cluster` returns only once
the worker has registered with the master, and always stops both daemons (process groups) on
exit, also after an error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from drkit.accounting.session import spark_jvm_options
from drkit.errors import AccountingError
from drkit.local.ports import free_port
from drkit.logs import log_tail

HOST = "127.0.0.1"


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:PORT, what --spark-master takes
    ui_url: str  # the master's web UI (its /json/ lists workers and applications)
    log_dir: Path


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _environment(work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        # Executors run this interpreter, which has pyspark (and drkit) installed.
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_DAEMON_JAVA_OPTS": spark_jvm_options(),
    }


def _daemon(main_class: str, args: list[str], work: Path, name: str) -> subprocess.Popen[bytes]:
    spark_class = _spark_home() / "bin" / "spark-class"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    with (work / "logs" / f"{name}.out").open("ab") as out:
        return subprocess.Popen(
            [str(spark_class), main_class, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_environment(work),
            cwd=work,
            start_new_session=True,
        )


def alive_workers(ui_url: str) -> int:
    """How many workers the master counts as alive (0 when it does not answer yet)."""
    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def _stop(process: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextmanager
def standalone_cluster(
    work: Path, cores: int = 2, memory: str = "2g", timeout_s: float = 90.0
) -> Iterator[StandaloneCluster]:
    """A running master and worker (``cores`` and ``memory`` offered to applications);
    raises AccountingError naming the daemon that did not come up (with its last log lines)."""
    work.mkdir(parents=True, exist_ok=True)
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    master_url, ui_url = f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}"
    master = _daemon(
        "org.apache.spark.deploy.master.Master",
        ["--host", HOST, "--port", str(port), "--webui-port", str(ui_port)],
        work,
        "master",
    )
    daemons = [master]
    try:
        worker_args = ["--host", HOST, "--cores", str(cores), "--memory", memory]
        worker_args += ["--webui-port", str(worker_ui), "--work-dir", str(work / "worker")]
        worker = _daemon(
            "org.apache.spark.deploy.worker.Worker", [*worker_args, master_url], work, "worker"
        )
        daemons.append(worker)
        deadline = time.monotonic() + timeout_s
        while alive_workers(ui_url) < 1:
            for process, name in zip(daemons, ("master", "worker"), strict=True):
                if process.poll() is not None:
                    raise AccountingError(
                        f"the Spark {name} exited (code {process.returncode}):\n"
                        f"{log_tail(work / 'logs' / f'{name}.out', 8)}"
                    )
            if time.monotonic() > deadline:
                raise AccountingError(
                    f"no Spark worker registered with {master_url} within {timeout_s:.0f}s; "
                    f"see {work / 'logs'}"
                )
            time.sleep(0.5)
        yield StandaloneCluster(master_url, ui_url, work / "logs")
    finally:
        for process in reversed(daemons):
            _stop(process)
