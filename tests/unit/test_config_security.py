"""Issue 46, item 3: security settings cannot be downgraded by accident.

``client_overrides`` are free-form librdkafka settings layered over ``security``: one could
turn SASL_SSL into SASL_PLAINTEXT (a password in clear), switch certificate or hostname checks
off, or log in as someone else - without a word. Such keys are refused unless the cluster says
``allow_insecure_overrides: true``; what is then weaker than it looks is a warning in
``drkit config validate`` (and its JSON), as are plaintext SASL passwords, disabled hostname
checks and http:// URLs that carry secrets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.config.security import security_warnings
from drkit.errors import ConfigError

SASL_SSL = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "drkit",
            "password": "pw"}  # fmt: skip


def _config(**dc1: object) -> str:
    return yaml.safe_dump(
        {"clusters": {"dc1": {"bootstrap_servers": "k1:9093", "security": SASL_SSL, **dc1}}}
    )


@pytest.mark.parametrize(
    "override",
    [
        {"security.protocol": "SASL_PLAINTEXT"},
        {"enable.ssl.certificate.verification": False},
        {"ssl.endpoint.identification.algorithm": "none"},
        {"sasl.username": "admin"},
        {"sasl.mechanisms": "PLAIN"},
    ],
)
def test_an_override_that_touches_security_is_refused_without_the_explicit_key(
    override: dict[str, object],
) -> None:
    [key] = override
    with pytest.raises(ConfigError, match=f"client_overrides.*{key}.*allow_insecure_overrides"):
        load_config_text(_config(client_overrides=override), env={})
    allowed = load_config_text(
        _config(client_overrides=override, allow_insecure_overrides=True), env={}
    )
    warnings = security_warnings(allowed)
    assert any(key in w and "dc1" in w for w in warnings), warnings


def test_tuning_overrides_pass_and_a_secure_config_has_no_warning() -> None:
    config = load_config_text(_config(client_overrides={"linger.ms": 20}), env={})
    assert security_warnings(config) == []


def test_weak_settings_are_warned_about_by_name() -> None:
    weak = yaml.safe_dump({
        "clusters": {
            "dc1": {"bootstrap_servers": "k1:9092", "security": {
                "protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "username": "u", "password": "p"}},
            "dc2": {"bootstrap_servers": "k2:9093", "security": {
                "protocol": "SSL", "ssl_endpoint_identification": False},
                "schema_registry": {"url": "http://reg:8080/apis/ccompat/v7",
                                    "username": "u", "password": "p"}},
        },
        "notifications": {"webhooks": [{"url": "http://hooks.example.net/T0KEN"}]},
    })  # fmt: skip
    warnings = security_warnings(load_config_text(weak, env={}))
    text = "\n".join(warnings)
    assert "clusters.dc1.security: SASL PLAIN over SASL_PLAINTEXT" in text
    assert "clusters.dc2.security.ssl_endpoint_identification: false" in text
    assert "clusters.dc2.schema_registry.url: http://" in text
    assert "notifications.webhooks[0].url: http://" in text
    assert "T0KEN" not in text  # the warning names the field, never the secret


def test_config_validate_prints_the_warnings_and_still_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(_config(client_overrides={"enable.ssl.certificate.verification": False},
                            allow_insecure_overrides=True))  # fmt: skip
    done = CliRunner().invoke(cli, ["config", "validate", str(path)])
    assert done.exit_code == 0, done.output
    assert "warning: clusters.dc1.client_overrides.enable.ssl.certificate.verification" in (
        done.output
    )
    as_json = CliRunner().invoke(cli, ["config", "validate", str(path), "-o", "json"])
    document = json.loads(as_json.stdout)
    assert document["ok"] is True and len(document["warnings"]) == 2  # and password: pw


def _validate(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["config", "validate", str(path)])
    return done.exit_code, done.output


def test_validate_warns_of_a_literal_secret_and_of_a_hook_that_cannot_start(
    tmp_path: Path,
) -> None:
    """Issue 45, W4: `config validate` said ok for a password written out in the file and for
    a hook whose command does not exist (or cannot run): both are said on stderr, exit 0."""
    script = tmp_path / "notify.sh"
    script.write_text("#!/bin/sh\n")  # not executable
    code, text = _validate(tmp_path, _config() + yaml.safe_dump({"failover": {"hooks": [
        {"when": "before", "command": ["drkit-no-such-command-45", "--now"]},
        {"when": "after", "command": [str(script)]},
        {"when": "after", "command": ["true"]},
    ]}}))  # fmt: skip
    assert code == 0, text
    assert (
        "clusters.dc1.security.password is a literal secret; use ${VAR} or a password file" in text
    ), text
    assert "failover.hooks[0].command: 'drkit-no-such-command-45' is not found on PATH" in text
    assert f"failover.hooks[1].command: '{script}' is not executable" in text
    assert "hooks[2]" not in text and "'pw'" not in text
    fine = _config().replace("password: pw", "password: ${DRKIT_T45_PW}")
    code, text = _validate(tmp_path, fine.replace("${DRKIT_T45_PW}", "'${DRKIT_T45_PW:-x}'"))
    assert code == 0 and "literal secret" not in text, text


def test_validate_refuses_a_runbooks_dir_that_does_not_exist(tmp_path: Path) -> None:
    code, text = _validate(
        tmp_path, _config() + f"failover: {{runbooks_dir: '{tmp_path / 'nowhere'}'}}\n"
    )
    assert code == 2, text
    assert f"failover.runbooks_dir: {tmp_path / 'nowhere'} is not a directory" in text, text
    code, text = _validate(tmp_path, _config() + f"failover: {{runbooks_dir: '{tmp_path}'}}\n")
    assert code == 0, text


def test_a_cluster_alias_longer_than_64_characters_is_refused(tmp_path: Path) -> None:
    """A 300-character alias validated: it prefixes replica and drkit topic names (249
    characters at most) and labels metrics."""
    code, text = _validate(tmp_path, f"clusters: {{{'d' * 300}: {{bootstrap_servers: 'a:1'}}}}\n")
    assert code == 2, text
    assert "at most 64 characters" in text, text
    code, text = _validate(tmp_path, f"clusters: {{{'d' * 64}: {{bootstrap_servers: 'a:1'}}}}\n")
    assert code == 0, text


def test_one_cluster_under_two_aliases_is_warned_about() -> None:
    """Issue 45, M9: a copy-pasted bootstrap address made dc2 the same brokers as dc1 - a
    failover between them would fence the brokers it sends the applications to."""
    same = yaml.safe_dump({"clusters": {
        "dc1": {"bootstrap_servers": "k1:9093,k2:9093", "security": SASL_SSL},
        "dc2": {"bootstrap_servers": "K2:9093", "security": SASL_SSL},
        "dc3": {"bootstrap_servers": "k2:9094", "security": SASL_SSL},
    }})  # fmt: skip
    warnings = security_warnings(load_config_text(same, env={}))
    assert [w.split(":")[0] for w in warnings] == ["clusters.dc2.bootstrap_servers"], warnings
    assert "K2:9093 is also clusters.dc1's" in warnings[0]


def test_an_oauth_login_without_principals_says_whose_name_drkit_assumes() -> None:
    oauth = {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
             "oauth": {"token_endpoint_url": "https://idp.example/token", "client_id": "drkit-app",
                       "client_secret": "${SECRET}"}}  # fmt: skip
    guessed = _config(security=oauth)
    [warning] = security_warnings(load_config_text(guessed, env={"SECRET": "s"}))
    assert warning.startswith("clusters.dc1.principals: not set") and "User:drkit-app" in warning
    named = _config(security=oauth, principals={"engine": "User:0b5e-77"})
    assert security_warnings(load_config_text(named, env={"SECRET": "s"})) == []


def test_acl_sync_writing_with_the_replicators_credentials_is_warned_about() -> None:
    """Security review 6, M3: the ACL copy writes the target's ACLs as the fencer; a config
    whose fencer logs in with the replicator's credentials would need the replicator to hold
    ALTER on the cluster - every ACL and SCRAM credential."""

    def document(security: dict[str, object]) -> str:
        cluster = {"security": SASL_SSL, "principals": {"replicator": "User:repl",
                   "fencer": "User:fence"}, **security}  # fmt: skip
        return yaml.safe_dump({
            "clusters": {"dc1": {"bootstrap_servers": "k1:9093", **cluster},
                         "dc2": {"bootstrap_servers": "k2:9093", **cluster}},
            "flows": [{"source": "dc1", "target": "dc2", "acl_sync": {"enabled": True}}],
        })  # fmt: skip

    warnings = security_warnings(load_config_text(document({}), env={}))
    assert [w for w in warnings if w.startswith("flows[0].acl_sync:")] == [
        "flows[0].acl_sync: the copy writes dc2's ACLs with the fencer's credentials, which "
        "are the replicator's here (User:drkit, not User:fence): it would need ALTER on the "
        "cluster, which lets it rewrite every ACL and SCRAM credential - give the replicator's "
        "process clusters.dc2.role_security.fencer"
    ], warnings
    fencer: dict[str, object] = {"role_security": {"fencer": {**SASL_SSL, "username": "fence"}}}
    assert not [w for w in security_warnings(load_config_text(document(fencer), env={}))
                if "acl_sync" in w]  # fmt: skip


def test_an_unsigned_jwt_override_is_a_security_override() -> None:
    """``enable.sasl.oauthbearer.unsecure.jwt`` makes librdkafka log in with a token it signs
    for nobody - a change of SASL identity, refused like ``sasl.*`` (security review 8, L5)."""
    override = {"enable.sasl.oauthbearer.unsecure.jwt": True}
    with pytest.raises(ConfigError, match=r"enable\.sasl\.oauthbearer\.unsecure\.jwt"):
        load_config_text(_config(client_overrides=override), env={})


@pytest.mark.parametrize("key", ["sasl.jaas.config", "sasl.oauthbearer.config"])
def test_sasl_config_strings_are_masked_when_shown(key: str) -> None:
    """Both carry credentials in their value (a JAAS line's password, an OAuth extension's API
    key) under a name without a secret word: masked by ``config show`` and named as a literal
    secret (security review 8, L4)."""
    from drkit.config.secrets import MASK, literal_secrets, redacted_dump

    value = "principal=svc extension_apikey=TOPSECRET123"
    document = {"clusters": {"dc1": {"bootstrap_servers": "k1:9093", "security": SASL_SSL,
                                     "allow_insecure_overrides": True,
                                     "client_overrides": {key: value}}}}  # fmt: skip
    shown = redacted_dump(load_config_text(yaml.safe_dump(document), env={}))
    assert shown["clusters"]["dc1"]["client_overrides"][key] == MASK
    assert "TOPSECRET123" not in json.dumps(shown)
    cluster = document["clusters"]["dc1"]
    assert literal_secrets(cluster, "clusters.dc1") == [
        "clusters.dc1.security.password",
        f"clusters.dc1.client_overrides.{key}",
    ]
