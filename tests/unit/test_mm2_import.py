"""``drkit config import``: a MirrorMaker 2 file becomes a drkit config; every key is mapped or
named as not carried over with a reason; no secret is copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.adoption.mm2_config import import_mm2, parse_properties
from drkit.cli import cli
from drkit.config import load_config

DATA = Path(__file__).resolve().parent.parent / "data" / "mm2"
SAMPLE = DATA / "connect-mirror-maker.properties"
SECURED = DATA / "strimzi-secured.properties"


def _every_key_accounted_for(path: Path) -> None:
    imported = import_mm2(path.read_text())
    keys = set(parse_properties(path.read_text()))
    mapped = {key for key, _ in imported.mapped}
    unsupported = {key for key, _ in imported.unsupported}
    assert mapped | unsupported == keys
    assert not mapped & unsupported, mapped & unsupported
    assert all(reason for _, reason in imported.unsupported)


@pytest.mark.parametrize("path", [SAMPLE, SECURED], ids=lambda p: p.stem)
def test_every_mm2_key_is_mapped_or_named_with_a_reason(path: Path) -> None:
    _every_key_accounted_for(path)


def test_kafkas_sample_becomes_two_flows_that_replicate_each_other(tmp_path: Path) -> None:
    out = tmp_path / "drkit.yaml"
    result = CliRunner().invoke(cli, ["config", "import", str(SAMPLE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    config = load_config(out)
    assert sorted(config.clusters) == ["A", "B"]
    assert config.clusters["A"].bootstrap_servers == "A_host1:9092,A_host2:9092,A_host3:9092"
    assert [f.name for f in config.flows] == ["A->B", "B->A"]
    assert all(f.target_replication_factor == 1 for f in config.flows)
    assert all(f.replication_policy.kind == "prefix" for f in config.flows)  # MM2's default
    text = out.read_text()
    assert (
        "#   tasks.max" not in text and "offset.storage.replication.factor: a Kafka Connect" in text
    )
    again = CliRunner().invoke(cli, ["config", "import", str(SAMPLE), "--out", str(out)])
    assert again.exit_code == 2 and "exists" in again.output  # never overwritten


def test_a_secured_multi_cluster_file_keeps_its_secrets_out(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "import", str(SECURED), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "do-not-copy" not in result.output
    document = json.loads(result.output)
    assert document["schema"] == "drkit.config.import/v1"
    assert sorted(document["env"]) == ["DRKIT_EAST_SASL_PASSWORD", "DRKIT_WEST_OAUTH_CLIENT_SECRET"]
    config = document["config"]
    east, west = config["clusters"]["east"]["security"], config["clusters"]["west"]["security"]
    assert (east["username"], east["password"]) == ("mm2-east", "${DRKIT_EAST_SASL_PASSWORD}")
    assert east["ssl_ca_location"] == "/opt/kafka/east-ca/ca.crt"
    assert west["oauth"]["client_id"] == "mm2-west" and west["oauth"]["scope"] == "kafka"
    assert west["ssl_endpoint_identification"] is False
    flows = {f"{f['source']}->{f['target']}": f for f in config["flows"]}
    assert sorted(flows) == ["east->archive", "east->west"]  # west->east is disabled
    assert flows["east->west"]["topics"] == {"include": ["orders", "payments.*"],
                                             "exclude": [".*\\.tmp"]}  # fmt: skip
    assert flows["east->west"]["replication_policy"] == {"kind": "identity"}
    assert flows["east->west"]["exactly_once"] is True
    assert flows["east->archive"]["replication_policy"] == {"kind": "prefix", "separator": "_"}
    reasons = {u["key"]: u["reason"] for u in document["unsupported"]}
    assert "keytool -exportcert -rfc" in reasons["west.ssl.truststore.location"]
    assert "--workers N" in reasons["tasks.max"]
    assert "client_overrides" in reasons["archive.consumer.max.poll.records"]


def test_properties_syntax_continuations_escapes_and_separators() -> None:
    text = "a = 1\nb:2\nc 3\n! comment\n# comment\nd = one \\\n    two\ne\\:f = x\\ty\n"
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "one two", "e:f": "x\ty"
    }  # fmt: skip


def test_a_file_without_clusters_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "mm2.properties"
    empty.write_text("tasks.max = 4\n")
    result = CliRunner().invoke(cli, ["config", "import", str(empty)])
    assert result.exit_code == 2 and "clusters: no cluster aliases" in result.output


def test_a_flow_to_a_cluster_the_file_does_not_define_is_an_error_not_an_empty_import() -> None:
    """It answered exit 0 with ``flows: []``: the operator's flow was silently gone."""
    from drkit.errors import ConfigError

    text = "clusters = dc1, dc2\ndc1.bootstrap.servers = a:9092\ndc2.bootstrap.servers = b:9092\n"
    with pytest.raises(ConfigError, match=r"dc1->dc3\.enabled: cluster 'dc3' is not in clusters"):
        import_mm2(text + "dc1->dc3.enabled = true\n")
    assert import_mm2(text + "dc1->dc2.enabled = true\n").document["flows"]
