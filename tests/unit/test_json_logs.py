"""``--log-format json``: every line drkit writes on stderr is one JSON object - log records,
the error boundary's messages, usage errors - and no secret from the config appears in any.

Run as real processes (``python -m drkit``): the log handler writes to the process's stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

SECRET = "s3cr3t-in-env"


def _config(tmp_path: Path) -> Path:
    """Two clusters nothing listens for, dc1 with SASL credentials from the environment."""
    path = tmp_path / "drkit.yaml"
    security = {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "username": "drkit",
        "password": "${DRKIT_TEST_DC1_PASSWORD}",
    }
    document = {
        "clusters": {
            "dc1": {"bootstrap_servers": "127.0.0.1:1", "security": security},
            "dc2": {"bootstrap_servers": "127.0.0.1:2"},
        },
        "flows": [{"source": "dc1", "target": "dc2"}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def _run(tmp_path: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """(exit code, stderr's lines as objects, stdout) of ``drkit --log-format json -v ARGS``."""
    env = {**os.environ, "DRKIT_TEST_DC1_PASSWORD": SECRET}
    state = str(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-m", "drkit", "--state-dir", state, "--log-format", "json", "-v", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines, "nothing on stderr"
    records = []
    for line in lines:
        record = json.loads(line)  # a plain line fails here
        assert isinstance(record, dict), line
        assert {"ts", "level", "logger", "msg"} <= set(record), line
        records.append(record)
    return done.returncode, records, done.stdout


def test_config_errors_are_json_records_with_their_exit_code(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters:\n  dc1:\n    bootstrap: x:1\n")
    code, records, _ = _run(tmp_path, "clusters", "check", "--config", str(broken))
    assert code == 2
    errors = [r for r in records if r["level"] == "error"]
    assert errors and all(r["exit_code"] == 2 and r["logger"] == "drkit.cli" for r in errors)
    assert any("bootstrap_servers: required key is missing" in r["msg"] for r in errors)


def test_unreachable_clusters_are_json_records_naming_each_cluster(tmp_path: Path) -> None:
    code, records, stdout = _run(tmp_path, "clusters", "check", "--config", str(_config(tmp_path)))
    assert code == 3
    named = {r["cluster"]: r["msg"] for r in records if r["level"] == "error"}
    assert set(named) == {"dc1", "dc2"}
    assert "unreachable" in named["dc1"]
    # Issue 45: these lines lacked the exit code the boundary's error records carry.
    errors = [r for r in records if r["level"] == "error"]
    assert all(r.get("exit_code") == 3 for r in errors), errors
    assert records[-1]["level"] == "error" and records[-1]["exit_code"] == 3, records[-1]
    assert stdout == ""  # no partial answer on stdout


def test_a_failed_plan_logs_json_with_fields_and_no_secret(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    code, records, _ = _run(tmp_path, "failover", "--plan", "--from", "dc1", "--to", "dc2",
                            "--config", config)  # fmt: skip
    assert code != 0
    assert any(r["logger"].startswith("drkit.failover") for r in records), records


@pytest.mark.parametrize("args", [["failover", "--nope"], ["status", "--output", "yaml"]])
def test_usage_errors_are_json_records_too(tmp_path: Path, args: list[str]) -> None:
    code, records, _ = _run(tmp_path, *args)
    assert code == 2
    assert [r["level"] for r in records] == ["error"], records
    assert records[0]["exit_code"] == 2
