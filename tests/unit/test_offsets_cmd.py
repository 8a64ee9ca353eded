"""``drkit offsets translate --offset``: positions kept outside Kafka, parsed and checked before
any cluster is asked (the translation itself runs on real brokers in test_translation)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.cli.offsets_cmd import parse_offsets
from drkit.errors import ConfigError
from drkit.records import TopicPartition


def test_offsets_parse_from_arguments_and_from_json_on_stdin() -> None:
    stdin = io.StringIO('[{"topic": "payments", "partition": 1, "offset": 7}]')
    assert parse_offsets(("orders:0:1200", "my.topic-x:3:0", "-"), stdin) == {
        TopicPartition("orders", 0): 1200,
        TopicPartition("my.topic-x", 3): 0,
        TopicPartition("payments", 1): 7,
    }


@pytest.mark.parametrize(
    "value", ["orders:0", "orders:x:1", "orders:0:-1", ":0:1", "orders", "orders:-2:5"]
)
def test_a_malformed_offset_is_named(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_offsets((value,), io.StringIO())
    assert value in str(caught.value.lines())


def test_a_partition_given_twice_with_two_offsets_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        parse_offsets(("orders:0:5", "orders:0:6"), io.StringIO())


def test_stdin_that_is_not_the_list_is_named() -> None:
    with pytest.raises(ConfigError, match="stdin is not a JSON list"):
        parse_offsets(("-",), io.StringIO('{"orders": 5}'))


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([], "--group/--offset"),
        (["--group", "g", "--offset", "orders:0:1"], "--group/--offset"),
        (["--offset", "orders:0"], "--offset"),
        (["--offset", "orders:0:1", "--from-checkpoints"], "--from-checkpoints"),
    ],
)
def test_the_command_refuses_bad_input_before_asking_a_cluster(
    tmp_path: Path, args: list[str], named: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
    )
    result = CliRunner().invoke(
        cli, ["offsets", "translate", "--from", "dc1", "--to", "dc2", "--config", str(config),
              *args],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
