"""Files only their owner reads (issue 46, item 6): the state dir 0700, the SQLite store and a
failback's export of application records 0600 whatever the umask, and no temporary name a
planted symlink can redirect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.private_files import private_file, write_private
from drkit.store import StateStore


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The umask many hosts run with (files 0644, directories 0755 unless asked otherwise)."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_the_default_state_dir_and_its_store_are_their_owners_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = tmp_path / "drkit.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    )
    upgraded = CliRunner().invoke(
        cli, ["--state-dir", str(state), "db", "upgrade", "--config", str(config)]
    )
    assert upgraded.exit_code == 0, upgraded.output
    assert _mode(state) == 0o700
    stores = list(state.glob("*.db"))
    assert stores and all(_mode(store) == 0o600 for store in stores), stores


def test_a_sqlite_store_is_created_for_its_owner_only_and_an_existing_one_is_tightened(
    tmp_path: Path,
) -> None:
    """Security review 6, L2: a store made before drkit created it 0600 stayed 0644 - and it
    holds the flows' signing keys now: any local user could forge offset syncs. Opening it
    takes group's and others' access away (its journal and migration lock too)."""
    created = tmp_path / "new" / "drkit.db"
    StateStore(f"sqlite:///{created}").upgrade()
    assert _mode(created) == 0o600
    assert _mode(created.with_name("drkit.db.migrate.lock")) == 0o600
    for mode in (0o644, 0o640):
        existing = tmp_path / f"operators-{mode:o}.db"
        existing.touch(mode=mode)
        existing.chmod(mode)
        lock = existing.with_name(existing.name + ".migrate.lock")
        lock.touch(mode=0o644)
        lock.chmod(0o644)
        StateStore(f"sqlite:///{existing}").upgrade()
        assert _mode(existing) == 0o600 and _mode(lock) == 0o600


def test_an_upgraded_installs_state_dir_is_tightened_to_its_owner(tmp_path: Path) -> None:
    """Security review 6, L2: ``private_dir`` left an existing state dir as it was - an
    install from before 0700 kept its 0755 directory and 0644 store, signing keys in it."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    store = state / "drkit.db"
    StateStore(f"sqlite:///{store}").upgrade()
    store.chmod(0o644)
    config = tmp_path / "drkit.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    )
    done = CliRunner().invoke(cli, ["--state-dir", str(state), "db", "current",
                                    "--config", str(config)])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert _mode(state) == 0o700 and _mode(store) == 0o600


def test_a_private_file_is_0600_renamed_into_place_and_follows_no_planted_symlink(
    tmp_path: Path,
) -> None:
    export = tmp_path / "tail.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    # The names the old code wrote through first: a symlink there redirected the write.
    for planted in (export.with_suffix(".jsonl.tmp"), tmp_path / ".tail.jsonl.partial"):
        planted.symlink_to(victim)
    with private_file(export) as out:
        out.write('{"offset": 1}\n')
        assert not export.exists()  # a reader never sees half a file
    assert export.read_text() == '{"offset": 1}\n'
    assert _mode(export) == 0o600
    assert victim.read_text() == "untouched"
    write_private(export, b"replaced")
    assert export.read_bytes() == b"replaced" and _mode(export) == 0o600


def test_a_write_that_fails_leaves_the_old_file_and_no_partial_one(tmp_path: Path) -> None:
    kept = tmp_path / "spec.json"
    kept.write_text("old")
    with pytest.raises(RuntimeError), private_file(kept) as out:
        out.write("half")
        raise RuntimeError("the export's source went away")
    assert kept.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.json"]


def test_a_drills_directory_and_its_config_holding_cluster_credentials_are_private(
    tmp_path: Path,
) -> None:
    """Issue 46, item 8: a drill's config copies its clusters' settings - credentials
    included - and was written 0644 in a 0755 directory."""
    from drkit.drills.environment import DrillEnvironment
    from drkit.drills.scenario import load_scenario

    security = {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                "username": "app", "password": "${DRILL_TEST_PASSWORD}"}  # fmt: skip
    clusters = {
        alias: {"bootstrap_servers": f"127.0.0.1:{port}", "security": security}
        for alias, port in (("dc1", 1), ("dc2", 2))
    }
    os.environ["DRILL_TEST_PASSWORD"] = "not-written-anywhere-1"
    try:
        env = DrillEnvironment.create(load_scenario("planned-switchover"), clusters, tmp_path / "d")
    finally:
        del os.environ["DRILL_TEST_PASSWORD"]
    config = (env.directory / "drkit.yaml").read_text()
    assert "${DRILL_TEST_PASSWORD}" in config and "not-written-anywhere-1" not in config
    assert _mode(env.directory) == 0o700
    assert _mode(env.directory / "drkit.yaml") == 0o600
    assert _mode(env.directory / "drill.db") == 0o600


@pytest.mark.parametrize(
    "settings",
    [
        {"security": {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "app",
                      "password": "literal-Secret-2"}},
        {"security": {"protocol": "SSL", "ssl_key_password": "literal-Secret-2"}},
        {"role_security": {"engine": {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                      "username": "e", "password": "literal-Secret-2"}}},
        {"client_overrides": {"sasl.password": "literal-Secret-2"},
         "allow_insecure_overrides": True},
        {"schema_registry": {"url": "https://r/apis/ccompat/v7", "username": "u",
                             "password": "literal-Secret-2"}},
    ],
)  # fmt: skip
def test_a_drill_never_copies_a_secret_written_out_in_the_operators_config(
    tmp_path: Path, settings: dict[str, object]
) -> None:
    """Issue 46, item 6: the drill's config copied its clusters' sections - a password written
    out in the operator's config was duplicated into every drill directory and outlived the
    drill.  Refused before the drill is stored or any file written, naming the setting (not its
    value); references and files are copied as they are."""
    import yaml

    from drkit.drills.environment import DrillEnvironment
    from drkit.drills.scenario import load_scenario
    from drkit.drills.service import raw_clusters
    from drkit.errors import ConfigError

    config = tmp_path / "drkit.yaml"
    clusters = {"dc1": {"bootstrap_servers": "127.0.0.1:1", **settings},
                "dc2": {"bootstrap_servers": "127.0.0.1:2"}}  # fmt: skip
    config.write_text(yaml.safe_dump({"version": 1, "clusters": clusters,
                                      "flows": [{"source": "dc1", "target": "dc2"}]}))  # fmt: skip
    with pytest.raises(ConfigError) as refused:
        raw_clusters(config)
    assert "clusters.dc1." in str(refused.value) and "literal-Secret-2" not in str(refused.value)
    with pytest.raises(ConfigError):
        DrillEnvironment.create(load_scenario("planned-switchover"), clusters, tmp_path / "d")
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())
    state = tmp_path / "state"
    result = CliRunner().invoke(
        cli, ["--state-dir", str(state), "drill", "run", "planned-switchover",
              "--config", str(config)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "a drill never copies one" in result.output and "literal-Secret-2" not in result.output
    listed = CliRunner().invoke(cli, ["--state-dir", str(state), "drill", "list",
                                      "--config", str(config)])  # fmt: skip
    assert "planned-switchover" not in listed.output, listed.output
