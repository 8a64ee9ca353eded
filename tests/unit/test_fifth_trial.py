"""The fifth new-user trial's misleading answers (o01, h24, h25, j18, j10/j19, l14, l07, a101,
a104, a003, a007, a065, l08): each is refused or named in one line, with the exit code the
README's table gives it.

No broker runs here: the Kafka calls are replaced with what the trial's brokers answered."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from drkit.access import doctor
from drkit.access.doctor import NO_BROKER, ClusterFacts, Status
from drkit.cli import cli
from drkit.errors import FatalKafkaError, KafkaError
from drkit.kafka import KafkaAdmin
from tests.replication_support import free_ports

_CONFIG = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    "flows: [{source: dc1, target: dc2}]\n"
)


def _drkit(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "state"), *args])


def _config(tmp_path: Path) -> str:
    path = tmp_path / "drkit.yaml"
    path.write_text(_CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n")
    return str(path)


def _answering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cluster takes the connection and answers Kafka's first request."""
    import drkit.cli.clusters_cmd
    import drkit.kafka.clients

    monkeypatch.setattr(drkit.kafka.clients, "require_answering", lambda *_a, **_k: None)
    monkeypatch.setattr(drkit.cli.clusters_cmd, "not_answering", lambda *_a, **_k: None)


# -- o01: verify --group of a group the source does not know ----------------------------------


def test_verify_refuses_a_group_with_no_committed_offsets_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It ran Spark for 113 s and said "OK: nothing skipped or missing" with no group in it."""
    import drkit.accounting.session
    import drkit.accounting.verify

    _answering(monkeypatch)
    monkeypatch.setattr(drkit.accounting.session, "require_spark_master", lambda _m: None)
    monkeypatch.setattr(KafkaAdmin, "groups_offsets", lambda _self, _groups, *_a, **_k: {})

    def spark(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(drkit.accounting.verify, "verify", spark)
    done = _drkit(tmp_path, "verify", "--flow", "dc1:dc2", "--group", "nosuchgroup",
                  "--config", _config(tmp_path))  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "'nosuchgroup': no committed offsets on dc1 (a typo?)" in done.output
    assert "Traceback" not in done.output


# -- h24, j10/j19: clusters check with no broker visible, or one cluster under two names -------


def _cluster(monkeypatch: pytest.MonkeyPatch, brokers: int, ids: dict[str, str]) -> None:
    _answering(monkeypatch)
    monkeypatch.setattr(KafkaAdmin, "wait_ready", lambda _self, *_a, **_k: brokers)

    def describe(self: KafkaAdmin, *_a: Any, **_k: Any) -> tuple[str, int, int]:
        return ids[self.endpoint.alias], 1, brokers

    monkeypatch.setattr(KafkaAdmin, "describe_cluster", describe)


def test_clusters_check_is_not_ok_when_metadata_shows_no_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A principal denied DESCRIBE on the cluster saw "dc2: ok  brokers=0", exit 0."""
    _cluster(monkeypatch, 0, {"dc2": "e2cOBD"})
    done = _drkit(tmp_path, "clusters", "check", "dc2", "--config", _config(tmp_path))
    assert done.exit_code == 3, done.output
    assert "ok  brokers=0" not in done.output
    assert f"cluster 'dc2': {NO_BROKER}" in done.output, done.output


def test_clusters_check_warns_when_two_aliases_answer_with_one_cluster_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cluster(monkeypatch, 1, {"dc1": "same", "dc2": "same"})
    done = _drkit(tmp_path, "clusters", "check", "--config", _config(tmp_path))
    assert done.exit_code == 0, done.output
    assert "warning: dc1 and dc2 are one cluster (cluster id same)" in done.output
    apart = _drkit(tmp_path, "clusters", "check", "-o", "json", "--config", _config(tmp_path))
    assert '"dc1 and dc2 are one cluster (cluster id same)"' in apart.output


# -- h25, j18: doctor - "no authorizer" only on SECURITY_DISABLED; one cluster, two names ------


def _doctor_cluster(
    monkeypatch: pytest.MonkeyPatch, brokers: int, acls: Exception | None, ids: dict[str, str]
) -> None:
    _cluster(monkeypatch, brokers, ids)

    def acl_entries(_self: KafkaAdmin, *_a: Any, **_k: Any) -> list[Any]:
        if acls is not None:
            raise acls
        return []

    monkeypatch.setattr(KafkaAdmin, "acl_entries", acl_entries)
    monkeypatch.setattr(KafkaAdmin, "broker_configs", lambda _self, *_a, **_k: {})


def test_doctor_tells_a_denied_or_timed_out_acl_read_from_no_authorizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "FAIL authorizer: none (SECURITY_DISABLED) ... set authorizer.class.name" when
    describing the ACLs timed out for a principal the authorizer denied."""
    from drkit.config.loader import load_config

    config = load_config(Path(_config(tmp_path)))
    timed_out = KafkaError("dc2: describe ACLs: _TIMED_OUT: Failed while waiting for controller")
    _doctor_cluster(monkeypatch, 0, timed_out, {"dc2": "x"})
    facts = doctor.examine_cluster("dc2", config, 5.0, KafkaAdmin)
    assert facts.authorizer is None
    lines = [f.line() for f in doctor.cluster_findings(config, facts)]
    assert not any("SECURITY_DISABLED" in line or "none" in line for line in lines), lines
    assert any("authorizer: cannot tell: dc2: describe ACLs: _TIMED_OUT" in x for x in lines)
    assert f"FAIL dc2: reachable: {NO_BROKER}" in lines, lines
    # The broker's own answer that no authorizer is configured still says so.
    disabled = FatalKafkaError("dc2: describe ACLs: SECURITY_DISABLED: No Authorizer")
    _doctor_cluster(monkeypatch, 1, disabled, {"dc2": "x"})
    facts = doctor.examine_cluster("dc2", config, 5.0, KafkaAdmin)
    assert facts.authorizer is False
    found = doctor.cluster_findings(config, facts)
    assert any(f.status is Status.FAIL and "SECURITY_DISABLED" in f.detail for f in found)


def test_doctor_fails_two_aliases_that_answer_with_one_cluster_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dc2's bootstrap at dc1's broker under another name: doctor read both ids and was quiet."""
    _doctor_cluster(monkeypatch, 1, None, {"dc1": "X", "dc2": "X"})
    done = _drkit(tmp_path, "doctor", "--config", _config(tmp_path))
    assert done.exit_code == 3, done.output
    assert "FAIL clusters: dc1 and dc2 are one cluster (cluster id X)" in done.output
    apart = [ClusterFacts("dc1", cluster_id="X"), ClusterFacts("dc2", cluster_id="Y")]
    assert doctor.same_cluster_findings({f.alias: f for f in apart}) == []


# -- l14, l07: monitor's arguments before the config and the store -------------------------------


def test_monitor_refuses_one_address_for_both_listeners_before_loading_anything(
    tmp_path: Path,
) -> None:
    """It loaded the config, the store and the monitor, took the observer id, then failed the
    second bind: "cannot listen on 0.0.0.0:18779: Address already in use", after 6 s."""
    missing = str(tmp_path / "no-such.yaml")  # loaded first, it would be the error
    for listen, metrics in (
        ("0.0.0.0:18779", "0.0.0.0:18779"),
        ("0.0.0.0:18779", "127.0.0.1:18779"),
    ):
        done = _drkit(tmp_path, "monitor", "--listen", listen, "--metrics-listen", metrics,
                      "--config", missing)  # fmt: skip
        assert done.exit_code == 2, done.output
        assert "--metrics-listen" in done.output and "give each its own port" in done.output
        # Before the config (missing: loaded, it would be the error) and the store: the
        # arguments alone (issue 51: the cause, not a clock).
        assert "not found" not in done.output
        assert not (tmp_path / "state").exists()
    same = _drkit(tmp_path, "monitor", "--listen", "127.0.0.1:18779", "--metrics-listen",
                  "127.0.0.1:18779", "--config", missing)  # fmt: skip
    assert "--listen and --metrics-listen name the same address" in same.output
    assert not (tmp_path / "state").exists()


def test_monitor_refuses_a_port_in_use_before_loading_the_config(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        for option in ("--listen", "--metrics-listen"):
            # The other listener on a free port: the default (9464) may be any monitor's here.
            other = ["--listen", f"127.0.0.1:{free_ports()}"] if option != "--listen" else []
            done = _drkit(tmp_path, "monitor", option, f"127.0.0.1:{port}", *other,
                          "--config", str(tmp_path / "no-such.yaml"))  # fmt: skip
            assert done.exit_code == 2, done.output
            assert f"{option}: cannot listen on 127.0.0.1:{port}: Address already in use" in (
                done.output
            ), done.output


# -- a101, a104: an empty --config ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_config_option_is_refused(tmp_path: Path, value: str) -> None:
    """'' was ignored and the state dir's config used; ' ' said "error:  : file not found"."""
    done = _drkit(tmp_path, "clusters", "check", "--config", value)
    assert done.exit_code == 2, done.output
    assert "--config" in done.output and "cannot be empty" in done.output, done.output


def test_a_config_file_that_is_not_there_is_named_quoted(tmp_path: Path) -> None:
    done = _drkit(tmp_path, "clusters", "check", "--config", "drkit.yaml ")
    assert done.exit_code == 2, done.output
    assert "--config: 'drkit.yaml ': file not found" in done.output, done.output


# -- a003, a007, a065, l08: wording -------------------------------------------------------------


def test_an_unknown_cluster_alias_is_quoted_beside_the_known_ones(tmp_path: Path) -> None:
    for alias in ("", "  dc1 "):
        for command in (["clusters", "check"], ["doctor"]):
            done = _drkit(tmp_path, *command, alias, "--config", _config(tmp_path))
            assert done.exit_code == 2, done.output
            assert f"unknown cluster {alias!r} (clusters: dc1, dc2)" in done.output, done.output


def test_a_run_id_that_is_not_a_number_says_so(tmp_path: Path) -> None:
    done = _drkit(tmp_path, "failover", "show", "abc", "--config", _config(tmp_path))
    assert done.exit_code == 2, done.output
    assert "'abc' is not a run id (a number; drkit failover list shows them)" in done.output
    assert "integer range" not in done.output


def test_an_empty_observer_id_reads_an_id(tmp_path: Path) -> None:
    done = _drkit(tmp_path, "monitor", "--observer", "", "--config", _config(tmp_path))
    assert done.exit_code == 2, done.output
    assert "an id cannot be empty" in done.output and "a id" not in done.output
