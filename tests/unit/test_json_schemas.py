"""One naming rule for every JSON document drkit prints or writes, and every one in the README
(issue 45, item 8): the names are read out of the code itself - each ``echo_document`` kind and
each ``drkit.<...>/v<n>`` constant - so a new document cannot slip past either check."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli

ROOT = Path(__file__).resolve().parents[2]
RULE = re.compile(r"drkit(\.[a-z]+)+/v[1-9][0-9]*")


def _schemas_in_code() -> dict[str, str]:
    """Every schema name in drkit/, with the file it is in."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "drkit").rglob("*.py")):
        tree = ast.parse(path.read_text())
        earlier = {id(node) for old in ast.walk(tree) if _names_earlier(old)
                   for node in ast.walk(old)}  # fmt: skip
        for node in ast.walk(tree):
            if id(node) in earlier:
                continue
            if isinstance(node, ast.Call) and _called(node) == "echo_document" and node.args:
                kind = node.args[0]
                assert isinstance(kind, ast.Constant) and isinstance(kind.value, str), path
                found[f"drkit.{kind.value}/v1"] = str(path.relative_to(ROOT))
            elif _schema_constant(node):
                assert isinstance(node, ast.Constant) and isinstance(node.value, str)
                found[node.value] = str(path.relative_to(ROOT))
    return found


def _schema_constant(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"drkit\.\S*/v\d+", node.value) is not None
    )


def _names_earlier(node: ast.AST) -> bool:
    """``_EARLIER_* = ...``: names older drkits wrote, still read, never written."""
    return isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id.startswith("_EARLIER_")
        for target in node.targets
    )


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def test_the_code_has_the_documents_it_is_known_for() -> None:
    """The scan itself works: it finds the documents the README's own examples use."""
    found = _schemas_in_code()
    assert {"drkit.status/v2", "drkit.failover.run/v1", "drkit.error/v1", "drkit.config/v1",
            "drkit.failover.list/v1", "drkit.fences.lift/v1"} <= set(found)  # fmt: skip
    assert len(found) >= 30, sorted(found)


def test_every_schema_name_follows_the_one_rule() -> None:
    wrong = {name: where for name, where in _schemas_in_code().items() if not RULE.fullmatch(name)}
    assert wrong == {}, "schema names are drkit.<lower-case words joined by dots>/v<n>"


def test_every_schema_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = {name: where for name, where in _schemas_in_code().items() if name not in readme}
    assert missing == {}, "add them to README.md's 'JSON output'"


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "drkit.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows:\n  - {source: dc1, target: dc2}\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    return config


@pytest.mark.parametrize(
    ("command", "schema", "field"),
    [
        (["failover", "list"], "drkit.failover.list/v1", "runs"),
        (["config", "show"], "drkit.config/v1", "config"),
    ],
)
def test_documents_that_once_printed_bare_json_wear_the_envelope(
    tmp_path: Path, command: list[str], schema: str, field: str
) -> None:
    config = _config(tmp_path)
    result = CliRunner().invoke(cli, [*command, "--config", str(config), "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == schema and document["generated_at"].endswith("Z"), document
    assert field in document, document


def test_config_show_prints_yaml_that_loads_back_to_the_json_document(tmp_path: Path) -> None:
    import yaml

    config = _config(tmp_path)
    text = CliRunner().invoke(cli, ["config", "show", "--config", str(config)])
    document = CliRunner().invoke(cli, ["config", "show", "--config", str(config), "-o", "json"])
    assert text.exit_code == 0 and document.exit_code == 0, text.output + document.output
    assert text.stdout.startswith(f"# {config}\n")
    assert yaml.safe_load(text.stdout) == json.loads(document.stdout)["config"]
