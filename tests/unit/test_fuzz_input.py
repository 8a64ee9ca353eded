"""Operator input never ends in a traceback: hypothesis feeds the config loader and the CLI
shapes an operator could type - near-valid configs with one thing wrong, arbitrary text,
arbitrary arguments - and every answer must be a config, a ConfigError or a clean exit."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.errors import ConfigError

VALID: dict[str, Any] = {
    "clusters": {
        "dc1": {"bootstrap_servers": "127.0.0.1:1"},
        "dc2": {
            "bootstrap_servers": "127.0.0.1:2",
            "security": {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "username": "u",
                "password": "p",
            },
        },
    },
    "flows": [
        {
            "source": "dc1",
            "target": "dc2",
            "topics": {"include": ["orders.*"]},
            "transforms": [{"type": "filter", "options": {"key_regex": "^t"}}],
        },
    ],
    "health": {"probe_interval_s": 5, "probe_timeout_s": 4},
    "failover": {"max_rpo_records": 10},
    "drills": {"schedule": [{"cron": "0 3 * * *", "source": "dc1", "target": "dc2"}]},
}

# Values an operator gets wrong: wrong types, empties, odd numbers, odd strings.
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["", "-1", "1e309", "${UNSET_VAR}", "[", "dc1", "dc9", ".*(", "0 3 * *"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=5), st.none(), max_size=2),
)  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = [p for p in _paths(VALID) if p]


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {**document, head: _replaced(document[head], rest, value)}
    copy = list(document)
    copy[head] = _replaced(copy[head], rest, value)
    return copy


def _loads_or_says_why(text: str) -> None:
    try:
        load_config_text(text, env={})
    except ConfigError as err:
        assert err.problems, text  # every refusal names at least one problem
        for line in err.lines():
            assert "Traceback" not in line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=ODD)
def test_a_config_with_one_wrong_value_loads_or_names_the_problem(
    path: tuple[Any, ...], value: Any
) -> None:
    try:
        text = yaml.safe_dump(_replaced(VALID, path, value))
    except (yaml.YAMLError, ValueError, OverflowError):
        return  # not expressible as YAML: no operator could write it
    _loads_or_says_why(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_as_a_config_loads_or_names_the_problem(text: str) -> None:
    _loads_or_says_why(text)


# Commands that answer from the config and the store alone (no cluster is contacted), with the
# argument vocabulary an operator types - right, wrong and misplaced.
COMMANDS = [
    ["config", "validate"], ["config", "show"], ["config", "import"], ["db", "current"],
    ["failover", "show"], ["failover", "list"], ["drill", "list"], ["drill", "show"],
    ["drill", "trend"], ["automation", "pause"], ["automation", "ack"], ["acls"],
    ["flows", "list"], ["pointer", "show"], ["fences", "list"],
]  # fmt: skip
WORDS = st.sampled_from([
    "--from", "--to", "--group", "--plan", "--yes", "-o", "json", "text", "yaml", "--config",
    "--role", "replicator", "monitor", "nobody", "--cluster", "dc1", "dc2", "dc9", "--limit",
    "0", "-1", "7", "x", "--resume", "--reason", "-m", "--out", "--html", "--force",
    "--overwrite-active-groups", "", "--", "--state-dir",
])  # fmt: skip


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fuzz")
    config = dict(VALID, state_store={"url": f"sqlite:///{directory / 'drkit.db'}"})
    (directory / "drkit.yaml").write_text(yaml.safe_dump(config))
    return directory


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(command=st.sampled_from(COMMANDS), words=st.lists(WORDS, max_size=5))
def test_any_arguments_end_in_an_answer_or_a_clean_error(
    workspace: Path, command: list[str], words: list[str]
) -> None:
    config = str(workspace / "drkit.yaml")
    args = [w if w != "--config" else f"--config={config}" for w in words]
    # In the workspace: an option taken as a file name (``--html --limit``) is written there.
    with contextlib.chdir(workspace):
        result = CliRunner().invoke(
            cli, ["--state-dir", str(workspace / "state"), *command, *args],
            env={"DRKIT_CONFIG": config}, catch_exceptions=True,
        )  # fmt: skip
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{command + args}: traceback") from result.exception
    assert "Traceback" not in result.output
