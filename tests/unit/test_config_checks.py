"""The config loader is handed its component checks (drkit.config_checks) by the edges: the
config package imports neither the topology nor the failover package, and every load in drkit/
passes the checks - but the two that may not need them, named here with why."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from drkit.config import load_config_text
from drkit.config_checks import CONFIG_CHECKS
from drkit.errors import ConfigError

DRKIT = Path(__file__).resolve().parents[2] / "drkit"
LOADS = {"load_config", "load_config_text"}
# Loads that pass no checks, and why that loses nothing.
UNCHECKED = {
    "drkit/replication_service.py": "a worker process re-reads the file its parent `drkit "
    "replicate` loaded with the checks; it builds the policy and transforms itself",
    "drkit/local/config_writer.py": "the generated local config uses built-in parts only",
}

BAD_PARTS = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:9092"}
  dc2: {bootstrap_servers: "127.0.0.1:9093"}
flows:
  - source: dc1
    target: dc2
    replication_policy: {kind: no-such-policy}
failover:
  hooks: [{when: before, step: move_pointr, command: [/bin/true]}]
"""


def _unchecked_loads() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in DRKIT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in LOADS and not any(k.arg == "checks" for k in node.keywords):
                where = str(path.relative_to(DRKIT.parent))
                found[where] = found.get(where, 0) + 1
    return found


def test_every_load_in_drkit_passes_the_checks_but_the_named_ones() -> None:
    found = _unchecked_loads()
    assert set(found) == set(UNCHECKED), "pass checks=CONFIG_CHECKS, or say here why not"


def test_the_config_package_loads_neither_topology_nor_failover() -> None:
    above = ("drkit.topology", "drkit.failover")
    probe = (
        f"import sys, drkit.config; print(sorted(m for m in sys.modules if m.startswith({above})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_the_edges_checks_refuse_what_the_model_alone_accepts() -> None:
    load_config_text(BAD_PARTS)  # the model's rules alone: no problem
    with pytest.raises(ConfigError) as caught:
        load_config_text(BAD_PARTS, checks=CONFIG_CHECKS)
    paths = [problem.path for problem in caught.value.problems]
    assert paths == ["flows[0].replication_policy.kind", "failover.hooks[0].step"]
