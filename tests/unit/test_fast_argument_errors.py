"""Bad arguments and scenarios are told before what runs a drill, the failover engine or a
checkpoint worker is imported (trial 5, a088-a094, n13, m09: 3-9 s for a typo, most of it
importing matplotlib, alembic and the engine before the arguments were looked at)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Modules a refusal of the arguments must not wait for (each takes a second or more).
HEAVY = ("matplotlib", "alembic", "drkit.drills.runner", "drkit.failover.engine",
         "drkit.replication_service", "drkit.store.db")  # fmt: skip

_PROBE = """
import json, sys
from click.testing import CliRunner
from drkit.cli import cli
result = CliRunner().invoke(cli, json.loads(sys.argv[1]))
heavy = json.loads(sys.argv[2])
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print(json.dumps({"code": result.exit_code, "output": result.output, "loaded": loaded}))
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    (tmp_path / "bad.yaml").write_text("foo: [\n")
    (tmp_path / "fields.yaml").write_text("name: x\n")
    return path


CASES = [
    (["drill", "run", "{dir}"], "is a directory"),
    (["drill", "run", "{dir}/bad.yaml"], "invalid YAML"),
    (["drill", "run", "{dir}/fields.yaml"], "required key is missing"),
    (["drill", "readiness", "--from", "dc1", "--to", "dc9"], "unknown cluster 'dc9'"),
    (["drill", "readiness", "--from", "dc2", "--to", "dc1"], "no flow dc2->dc1"),
    (["drill", "readiness", "--from", "dc1", "--to", "dc1"], "both name dc1"),
    (["checkpoint", "--flow", "dc9:dc1"], "no flow 'dc9:dc1'"),
]


@pytest.mark.parametrize(("args", "says"), CASES)
def test_an_argument_error_is_told_before_the_heavy_imports(
    config: Path, args: list[str], says: str
) -> None:
    argv = [a.format(dir=config.parent) for a in args] + ["--config", str(config)]
    _refused_light(argv, says)


def test_demo_with_an_unknown_scenario_is_told_before_the_heavy_imports(tmp_path: Path) -> None:
    argv = ["--state-dir", str(tmp_path), "demo", "--skip-verify", "--scenario", "nosuch"]
    _refused_light(argv, "no scenario 'nosuch'")


def _refused_light(argv: list[str], says: str) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer = json.loads(probe.stdout.splitlines()[-1])
    assert answer["code"] == 2, answer["output"]
    assert says in answer["output"], answer["output"]
    assert answer["loaded"] == [], f"imported before refusing {argv}: {answer['loaded']}"
