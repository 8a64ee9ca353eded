"""Bad inputs from the second new-user trial (issue 45): each one gave a traceback, a hang or a
misleading answer; now each is refused in one line naming the cause (exit 2), or answered
right. Run through the CLI as a user types them."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli

GOOD = (
    "clusters: {dc1: {bootstrap_servers: '127.0.0.1:1'}, dc2: {bootstrap_servers: '127.0.0.1:2'}}\n"
)


def _drkit(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "state"), *args])


def _refused(done: Result, *named: str) -> None:
    assert done.exit_code == 2, done.output
    assert ("Traceback" not in done.output and not isinstance(done.exception, Exception)) or (
        isinstance(done.exception, SystemExit)
    ), done.exception
    for text in named:
        assert text in done.output, done.output


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for this, last in zip("bcdefgh", "abcdefg", strict=True):
        levels.append(f"{this}: &{this} [" + ",".join([f"*{last}"] * 9) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\n" + GOOD)
    # Refused by the expansion guard's words; it hung for good before, which pytest's own
    # timeout fails (issue 51: no wall-clock threshold).
    _refused(_drkit(tmp_path, "config", "validate", str(bomb)), "expands to more than")


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "0"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    tmp_path: Path, value: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    for command in (["clusters", "check"], ["doctor"]):
        done = _drkit(tmp_path, *command, "--config", str(config), "--timeout", value)
        _refused(done, "--timeout")


def test_refusals_that_were_tracebacks(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    mm2 = tmp_path / "mm2.properties"
    mm2.write_text("clusters = dc1, dc2\ndc1.bootstrap.servers = a:9092\n"
                   "dc2.bootstrap.servers = b:9092\ndc1->dc2.enabled = true\n")  # fmt: skip
    out = str(tmp_path / "no" / "dir" / "x.yaml")
    _refused(_drkit(tmp_path, "config", "import", str(mm2), "--out", out), "--out", "cannot write")
    _refused(_drkit(tmp_path, "groups", "lag", "--config", str(config), "--cluster", "dc1",
                    "--group", ""), "--group", "cannot be empty")  # fmt: skip
    _refused(_drkit(tmp_path, "drill", "trend", "--limit", "99999999999999999999"), "--limit")
    _refused(_drkit(tmp_path, "db", "upgrade", "--revision", "nonsense"), "--revision")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "drkit.db").write_text("garbage\n")
    done = CliRunner().invoke(cli, ["--state-dir", str(garbage), "db", "current"])
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    assert "file is not a database" in done.output


@pytest.mark.parametrize("where", ["state-dir", "config"])
@pytest.mark.parametrize("command", [["db", "current"], ["failover", "list"], ["pointer", "show"]])
def test_a_store_file_that_is_not_a_database_is_bad_input_naming_it(
    tmp_path: Path, where: str, command: list[str]
) -> None:
    """W6 (issue 45): a text file where the SQLite store belongs exited 1 ("the operation
    failed"): it is the operator's file that is wrong - exit 2, naming it, nothing written."""
    state = tmp_path / "state"
    state.mkdir()
    store = state / "drkit.db" if where == "state-dir" else tmp_path / "notes.txt"
    store.write_text("these are my notes\n")
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + (f"state_store: {{url: 'sqlite:///{store}'}}\n" if where == "config"
                              else ""))  # fmt: skip
    done = _drkit(tmp_path, *command, "--config", str(config))
    _refused(done, f"{store} is not a drkit store", "file is not a database")
    assert store.read_text() == "these are my notes\n"


def test_an_empty_state_dir_is_refused_not_the_default(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["--state-dir", "", "pointer", "show"])
    _refused(done, "--state-dir", "cannot be empty")


def test_a_groups_config_applies_to_its_subcommand(tmp_path: Path) -> None:
    """'drkit failover --config F list' answered from the state dir's store, whatever F was."""
    _refused(_drkit(tmp_path, "failover", "--config", str(tmp_path / "missing.yaml"), "list"),
             "missing.yaml")  # fmt: skip
    store = tmp_path / "other.db"
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"state_store: {{url: 'sqlite:///{store}'}}\n")
    done = _drkit(tmp_path, "failover", "--config", str(config), "list")
    assert done.exit_code == 0, done.output
    assert store.exists()  # the config's store, not the state dir's


def test_a_usage_error_under_o_json_is_a_document_on_stdout(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    done = _drkit(tmp_path, "clusters", "check", "--config", str(config), "-o", "json", "dc9")
    assert done.exit_code == 2
    document = json.loads(done.stdout)
    assert document["schema"] == "drkit.error/v1" and "dc9" in document["errors"][0]


def test_config_validate_sends_nothing_to_the_clusters(tmp_path: Path) -> None:
    """Its help says nothing is sent; a listener at the bootstrap address heard a Kafka request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    connected: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connected.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    config = tmp_path / "c.yaml"
    config.write_text(f"clusters: {{dc1: {{bootstrap_servers: '127.0.0.1:{port}'}}}}\n")
    try:
        done = _drkit(tmp_path, "config", "validate", str(config))
        assert done.exit_code == 0, done.output
        time.sleep(1.0)  # a client built with the address connects within milliseconds
    finally:
        stop.set()
        thread.join(2)
        listener.close()
    assert connected == []


@pytest.mark.parametrize("value", ["", "  ", "a b", "obs\n1"])
def test_an_empty_or_blank_observer_or_worker_id_is_refused_not_replaced(
    tmp_path: Path, value: str
) -> None:
    """An empty --observer / --worker-id silently became the host name (the default), so two
    monitors meant to be distinct voted as one; a blank one looked like another id."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    _refused(_drkit(tmp_path, "monitor", "--config", str(config), "--observer", value),
             "--observer")  # fmt: skip
    _refused(_drkit(tmp_path, "replicate", "--config", str(config), "--worker-id", value),
             "--worker-id")  # fmt: skip


def test_a_configured_sqlite_store_in_a_missing_directory_is_refused_not_created(
    tmp_path: Path,
) -> None:
    """A typo in state_store.url started a new, empty store there (no pointer, no lease, no
    runs: a second engine could fail over beside the first); the state dir's default store is
    still created."""
    missing = tmp_path / "no-such-dir" / "drkit.db"
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"state_store: {{url: 'sqlite:///{missing}'}}\n")
    for command in (["pointer", "show"], ["failover", "list"], ["db", "upgrade"]):
        _refused(_drkit(tmp_path, *command, "--config", str(config)),
                 "state_store.url", "does not exist")  # fmt: skip
    assert not missing.parent.exists()
    default = tmp_path / "default.yaml"
    default.write_text(GOOD)
    done = _drkit(tmp_path, "db", "upgrade", "--config", str(default))
    assert done.exit_code == 0, done.output
    assert (tmp_path / "state" / "drkit.db").is_file()


def test_the_third_trials_bad_names_are_refused_before_anything(tmp_path: Path) -> None:
    """The third new-user trial (issue 45): an empty --group reached the Kafka client (a
    traceback and "retry"), "User:" was taken for a principal (its ACLs locked a broker out of
    its own heartbeats), an empty or multi-line reason was recorded, and a scenario naming a
    cluster the config lacks gave a KeyError and a failed drill in the store."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + "flows: [{source: dc1, target: dc2}]\n")
    c = ["--config", str(config)]
    for args in (["offsets", "translate", "--group", "", "--from", "dc1", "--to", "dc2", *c],
                 ["failover", "--from", "dc1", "--to", "dc2", "--plan", "--group", "", *c],
                 ["verify", "--flow", "dc1->dc2", "--group", "", "--write-spec",
                  str(tmp_path / "s.json"), *c]):  # fmt: skip
        _refused(_drkit(tmp_path, *args), "--group", "cannot be empty")
    for principal in ("User:", "notaprincipal", "User: x"):
        _refused(_drkit(tmp_path, "acls", "--role", "replicator", "--cluster", "dc2",
                        "--principal", principal, *c), "--principal")  # fmt: skip
    for reason in ("", "a\nforged line"):
        _refused(_drkit(tmp_path, "flows", "pause", "dc1->dc2", "-m", reason, *c), "--reason")
    scenario = tmp_path / "d9.yaml"
    shipped = (
        Path(__file__).resolve().parents[2] / "runbooks" / "drills" / "planned-switchover.yaml"
    )
    scenario.write_text(shipped.read_text().replace("source: dc1", "source: dc9"))
    _refused(_drkit(tmp_path, "drill", "run", str(scenario), *c), "dc9", "nothing was done")
    listed = _drkit(tmp_path, "drill", "list", *c)
    assert "planned" not in listed.output, listed.output


def test_a_sqlite_store_named_by_drkit_db_url_in_a_missing_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such" / "x.db"
    monkeypatch.setenv("DRKIT_DB_URL", f"sqlite:///{missing}")
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    for command in (["db", "current"], ["pointer", "show"]):
        _refused(_drkit(tmp_path, *command, "--config", str(config)),
                 "$DRKIT_DB_URL", "does not exist")  # fmt: skip
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    ("flow", "named"),
    [
        ("replication_policy: {kind: prefix, separator: /}", "separator"),
        ("target_replication_factor: 100000", "target_replication_factor"),
    ],
)
def test_flow_settings_kafka_would_refuse_at_run_time_are_refused_by_validate(
    tmp_path: Path, flow: str, named: str
) -> None:
    """They validated, then the worker died: a '/' in every replica's name (Kafka: invalid topic
    name), a replication factor beyond what the client accepts (a traceback in replicate)."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"flows: [{{source: dc1, target: dc2, {flow}}}]\n")
    _refused(_drkit(tmp_path, "config", "validate", str(config)), named)


def test_local_logs_takes_a_positive_number_of_lines(tmp_path: Path) -> None:
    for lines in ("0", "-5"):
        _refused(_drkit(tmp_path, "local", "logs", "dc1", "--lines", lines), "--lines")


def test_a_webhook_url_python_cannot_split_is_refused_naming_its_key(tmp_path: Path) -> None:
    """Seventh trial (issue 45): a webhook URL with an unclosed IPv6 bracket ended config
    validate in a traceback (ValueError: Invalid IPv6 URL, from its http:// warning)."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + "notifications: {webhooks: [{url: 'http://[::1'}]}\n")
    done = _drkit(tmp_path, "config", "validate", str(config))
    _refused(done, "notifications.webhooks[0].url", "not a valid URL")
    assert "Value error" not in done.output


def test_bootstrap_servers_separated_by_spaces_get_no_ipv6_hint(tmp_path: Path) -> None:
    """Seventh trial (issue 45): '127.0.0.1:9092 127.0.0.1:9093' was answered 'write an IPv6
    address in brackets, [127.0.0.1:9092 127.0.0.1]:9093'."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD.replace("'127.0.0.1:1'", "'127.0.0.1:9092 127.0.0.1:9093'"))
    done = _drkit(tmp_path, "config", "validate", str(config))
    _refused(done, "clusters.dc1.bootstrap_servers", "separate bootstrap servers with ','")
    assert "IPv6" not in done.output


def test_a_file_named_as_the_store_keeps_its_mode_when_refused(tmp_path: Path) -> None:
    """Seventh trial (issue 45): state_store.url naming another file (sqlite:////etc/hostname)
    made it 0700 ('made private: others could read it'), then said it is not a drkit store and
    'nothing was changed'. A file that is not a store is refused before its mode is touched."""
    notes = tmp_path / "notes.txt"
    notes.write_text("these are my notes\n")
    notes.chmod(0o644)
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"state_store: {{url: 'sqlite:///{notes}'}}\n")
    done = _drkit(tmp_path, "failover", "list", "--config", str(config))
    _refused(done, f"{notes} is not a drkit store", "nothing was changed")
    assert notes.stat().st_mode & 0o777 == 0o644
    assert "made private" not in done.output


def test_local_up_makes_the_state_dir_private_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seventh trial (issue 45): `local up` created the state dir 0755, so the next command
    warned 'made private: others could read it (drkit's state holds signing keys)' of the
    directory drkit had just made. It is made 0700 before the brokers start."""
    from drkit.local import LocalKafka

    modes: list[int] = []

    def up(_self: object, *_args: object, **_kwargs: object) -> list[object]:
        modes.append((tmp_path / "state").stat().st_mode & 0o777)
        raise AssertionError("no brokers in a unit test")

    monkeypatch.setattr(LocalKafka, "up", up)
    _drkit(tmp_path, "local", "up")
    assert modes == [0o700]


def test_a_flow_excluding_each_topic_it_includes_is_warned(tmp_path: Path) -> None:
    """Seventh trial (issue 45): topics {include: [orders], exclude: [orders]} validated without
    a word, where exclude ['.*'] is warned: the flow selects no topic either way."""
    config = tmp_path / "c.yaml"
    config.write_text(
        GOOD + "flows: [{source: dc1, target: dc2, topics: {include: [orders, payments], "
        "exclude: [payments, orders]}}]\n"
    )
    done = _drkit(tmp_path, "config", "validate", str(config))
    assert done.exit_code == 0, done.output
    assert "flows[0].topics.exclude" in done.output and "selects no topic" in done.output


def test_an_oauth_token_endpoint_python_cannot_split_is_refused_naming_its_key(
    tmp_path: Path,
) -> None:
    """Seventh trial (issue 45): token_endpoint_url 'https://[idp/token' ended config validate
    in a traceback (ValueError: Invalid IPv6 URL, from its http:// warning)."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1:\n    bootstrap_servers: '127.0.0.1:1'\n    security:\n"
        "      protocol: SASL_SSL\n      sasl_mechanism: OAUTHBEARER\n      oauth:\n"
        "        token_endpoint_url: 'https://[idp/token'\n        client_id: x\n"
        "        client_secret: y\n  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    )
    done = _drkit(tmp_path, "config", "validate", str(config))
    _refused(done, "clusters.dc1.security.oauth.token_endpoint_url", "not a valid URL")


def test_a_store_path_that_is_no_regular_file_is_refused_untouched(tmp_path: Path) -> None:
    """Seventh trial (issue 45): state_store.url sqlite:////dev/null made /dev/null 0600 ('made
    private') and answered 'revision none (behind head: run drkit db upgrade)'; a FIFO there was
    made private, then opened - and the command hung. Neither is a store: refused, untouched."""
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"state_store: {{url: 'sqlite:///{fifo}'}}\n")
    done: list[Result] = []
    command = threading.Thread(
        target=lambda: done.append(_drkit(tmp_path, "db", "current", "--config", str(config))),
        daemon=True,
    )
    command.start()
    command.join(30)
    assert fifo.stat().st_mode & 0o777 == 0o644
    assert done, "the command hung on the FIFO"
    _refused(done[0], f"{fifo} is not a drkit store", "not a regular file")


@pytest.mark.parametrize("offset", ["1e400", "true", "5.5", "[5]"])
def test_an_offset_on_stdin_that_is_no_whole_number_is_refused(offset: str) -> None:
    """Seventh trial (issue 45): `--offset -` given {"offset": 1e400} ended in a traceback
    (OverflowError: cannot convert float infinity to integer); true was translated as offset 1
    and 5.5 as 5, as if asked."""
    import io

    from drkit.errors import ConfigError
    from drkit.offsets.lookup import parse_offsets

    document = '[{"topic": "orders", "partition": 0, "offset": ' + offset + "}]"
    with pytest.raises(ConfigError) as refused:
        parse_offsets(["-"], io.StringIO(document))
    assert "--offset -" in str(refused.value)


def test_adopt_refuses_an_empty_mm2_syncs_topic(tmp_path: Path) -> None:
    """Seventh trial (issue 45): `adopt --mm2-syncs-topic ''` went on with the default topic
    (mm2-offset-syncs.dc2.internal) as if no topic was given."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + "flows: [{source: dc1, target: dc2}]\n")
    done = _drkit(
        tmp_path, "adopt", "--flow", "dc1:dc2", "--mm2-syncs-topic", "", "--config", str(config)
    )
    _refused(done, "--mm2-syncs-topic", "cannot be empty")


def test_db_upgrade_to_a_revision_the_store_is_past_says_nothing_was_applied(
    tmp_path: Path,
) -> None:
    """Seventh trial (issue 45): `db upgrade --revision 0001` on a store at head answered 'at
    revision 0009', exit 0, and '--revision base' on a new store 'at revision None' - as if
    each had done what was asked."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    done = _drkit(tmp_path, "db", "upgrade", "--revision", "base", "--config", str(config))
    assert done.exit_code == 0, done.output
    assert "None" not in done.output and "nothing to apply" in done.output, done.output
    assert _drkit(tmp_path, "db", "upgrade", "--config", str(config)).exit_code == 0
    done = _drkit(tmp_path, "db", "upgrade", "--revision", "0001", "--config", str(config))
    assert done.exit_code == 0, done.output
    assert "nothing to apply" in done.output and "never goes back" in done.output, done.output


def test_a_summary_to_import_that_is_no_json_is_named_as_not_a_summary(tmp_path: Path) -> None:
    """Seventh trial (issue 45): `verify --import-summary /etc/hostname` said 'cannot read
    /etc/hostname: Expecting value: line 1 column 1 (char 0)' - it was read; it is no summary."""
    from drkit.accounting.verify import load_summary
    from drkit.config.model import FlowConfig
    from drkit.errors import ConfigError

    text = tmp_path / "hostname"
    text.write_text("vm-1\n")
    with pytest.raises(ConfigError) as refused:
        load_summary(text, FlowConfig(source="dc1", target="dc2"))
    assert f"{text} is not a" in str(refused.value) and "cannot read" not in str(refused.value)


def test_a_shipped_scenario_named_with_yaml_points_to_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seventh trial (issue 45): `drill run unplanned-loss-of-dc1.yaml` said only 'file not
    found' - the shipped scenario of that file name is run as unplanned-loss-of-dc1."""
    from drkit.drills.scenario import resolve
    from drkit.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        resolve("unplanned-loss-of-dc1.yaml")
    assert "'unplanned-loss-of-dc1'" in str(refused.value)


def test_fences_lift_refuses_an_empty_topic(tmp_path: Path) -> None:
    """Seventh trial (issue 45): `fences lift --topic ''` answered 'not fenced on dc1:  (fenced
    there: nothing)' - an empty name is refused as every other empty name is."""
    (tmp_path / "state").mkdir()
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    done = _drkit(
        tmp_path, "fences", "lift", "--cluster", "dc1", "--topic", "", "-m", "x",
        "--config", str(config),
    )  # fmt: skip
    _refused(done, "--topic", "cannot be empty")


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ("127.0.0.1:9092,", "an empty entry (a ',' too many?)"),  # eighth trial y07
        ("127.0.0.1:0", "port 0 is outside 1..65535"),  # y08
        ("127.0.0.1:65536", "port 65536 is outside 1..65535"),  # y09
    ],
)
def test_a_bootstrap_list_says_which_part_is_wrong(tmp_path: Path, servers: str, said: str) -> None:
    """Eighth trial (issue 45): a trailing ',' answered "'' is not host:port", ports 0 and
    65536 "'127.0.0.1:0' is not host:port" - true, but not why."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD.replace("'127.0.0.1:1'", repr(servers)))
    _refused(_drkit(tmp_path, "config", "validate", str(config)), said)


def test_a_client_override_without_a_value_is_one_line(tmp_path: Path) -> None:
    """Eighth trial y18 (issue 45): `linger.ms:` with no value gave four lines, one per type
    the value may have (linger.ms.str, .int, .float, .bool)."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1', client_overrides: {linger.ms: }}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    )
    done = _drkit(tmp_path, "config", "validate", str(config))
    _refused(done, "client_overrides: linger.ms: no value: give a string, a number or true/false")
    assert done.output.count("error:") == 1, done.output


def test_flows_list_with_no_flow_in_the_config_says_so(tmp_path: Path) -> None:
    """Eighth trial ya66 (issue 45): `flows list` with `flows: []` printed nothing, exit 0."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + "flows: []\n")
    assert _drkit(tmp_path, "db", "upgrade", "--config", str(config)).exit_code == 0
    done = _drkit(tmp_path, "flows", "list", "--config", str(config))
    assert done.exit_code == 0, done.output
    assert "no flows in the config" in done.output, done.output


@pytest.mark.parametrize("name", ["", " ", "a b"])
def test_monitor_refuses_an_allow_host_that_names_no_host(tmp_path: Path, name: str) -> None:
    """Eighth trial ya86 (issue 45): `monitor --allow-host ''` was taken and the monitor ran,
    the empty name allowing nothing."""
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    with socket.create_server(("127.0.0.1", 0)) as taken:  # never serve, even if taken
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        done = _drkit(
            tmp_path, "monitor", "--config", str(config), "--listen", listen, "--allow-host", name
        )
    _refused(done, "--allow-host")


@pytest.mark.parametrize(
    ("section", "key"), [("policy", "rto_s"), ("policy", "rpo_s"), ("fault", "at_s")]
)
def test_a_drill_scenario_refuses_an_infinite_number_of_seconds(
    tmp_path: Path, section: str, key: str
) -> None:
    """Eighth trial yb01 (issue 45): `policy: {rto_s: .inf}` was taken; the drill ran 46 s and
    ended in a traceback drawing the RTO chart (matplotlib: Axis limits cannot be NaN or Inf).
    An infinite fault.at_s would wait for ever."""
    import yaml

    shipped = Path(__file__).parents[2] / "runbooks" / "drills" / "unplanned-loss-of-dc1.yaml"
    scenario = yaml.safe_load(shipped.read_text())
    scenario[section][key] = float("inf")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    config = tmp_path / "c.yaml"
    config.write_text(GOOD)
    done = _drkit(tmp_path, "drill", "run", str(path), "--skip-verify", "--config", str(config))
    _refused(done, f"{section}.{key}")


def test_status_marks_an_observation_too_old_to_count() -> None:
    """Eighth trial yh01 (issue 45): with dc1 stopped, `drkit status --probe` showed the last
    word of a monitor stopped minutes before, 'vm: HEALTHY - probe ok', as if it held now."""
    from drkit.cli.monitor_cmd import _observer_line
    from drkit.health.evaluation import ClusterState
    from drkit.status.document import ObserverView

    def view(updated_at: float, fresh: bool) -> ObserverView:
        return ObserverView(ClusterState.HEALTHY, None, updated_at, fresh, {}, "probe ok")

    now = time.time()
    old = _observer_line("vm", view(now - 200, fresh=False), now)
    assert "probe ok (stale: last heard 200s ago, not counted)" in old, old
    assert "stale" not in _observer_line("vm", view(now - 1, fresh=True), now)


def test_config_validate_dash_says_stdin_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighth trial ya06 (issue 45): `... | drkit config validate -` answered '-: file not found'
    (drkit reads no config from stdin; a user took '-' for it)."""
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["config", "validate", "-"], input="garbage: [")
    _refused(done, "drkit reads no config from stdin ('-'): give the file's path")


@pytest.mark.parametrize(
    ("given", "said"),
    [("'1'", "version: write 1 unquoted"), ("2", "version: 2: this drkit reads version 1")],
)
def test_a_config_version_it_cannot_read_says_what_to_write(
    tmp_path: Path, given: str, said: str
) -> None:
    """Eighth trial y31 (issue 45): `version: '1'` answered 'version: Input should be 1'."""
    config = tmp_path / "c.yaml"
    config.write_text(f"version: {given}\n" + GOOD)
    _refused(_drkit(tmp_path, "config", "validate", str(config)), said)
