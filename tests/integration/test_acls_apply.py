"""``drkit acls --apply`` on a cluster without ACLs that lets everyone in (issue 45, item 1):
the first ALLOW on a resource locks every principal it does not name out of it.  Only a real
broker says whether it shows ``allow.everyone.if.no.acl.found``, so this runs on one (a scratch
cluster: its ACLs go with it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from drkit.acl.rules import AclEntry, Operation, Resource
from drkit.cli import cli
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import wait_until


def test_acls_apply_on_an_open_cluster_warns_and_asks_before_locking_others_out(
    scratch: ClusterUnderTest, tmp_path: Path
) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "dc9": {"bootstrap_servers": "127.0.0.1:1"},
                    scratch.name: {"bootstrap_servers": scratch.bootstrap_servers},
                },
                "flows": [{"source": "dc9", "target": scratch.name}],
            }
        )
    )
    command = ["--state-dir", str(tmp_path / "state"), "acls", "--role", "replicator",
               "--cluster", scratch.name, "--principal", "User:replicator", "--apply",
               "--config", str(config)]  # fmt: skip
    admin = scratch.admin()
    assert admin.acl_entries() == set()  # a local cluster: an authorizer, no ACL, open
    # The test connects as User:ANONYMOUS and is no super user: its rights on the cluster
    # (describing and creating ACLs) are kept by an ACL of its own there first.
    keep = AclEntry("User:ANONYMOUS", Resource.cluster(), Operation.ALL)
    admin.create_entries([keep])
    wait_until(lambda: admin.acl_entries() == {keep}, 30, 0.2, what="the test's own ACL shown")
    refused = CliRunner().invoke(cli, command)  # no terminal to ask on, no --yes
    assert refused.exit_code == 2, refused.output
    # Kafka shows a setting it does not define itself without its value: the config's word
    # (allow_everyone_if_no_acl, true by default) counts, and the warning says so.
    said = (f"{scratch.name} has no ACL on groups prefixed 'drkit-', topics prefixed 'dc9.', "
            "topic 'drkit-control.dc9.internal', topic 'drkit-offset-syncs.dc9.internal' and "
            f"1 more and clusters.{scratch.name}.allow_everyone_if_no_acl is true (its brokers "
            "do not show allow.everyone.if.no.acl.found; set it false if they deny by "
            "default): every principal may use")  # fmt: skip
    assert said in refused.output, refused.output
    assert "only User:replicator and the super users may - grant the other" in refused.output
    assert "--yes: not a terminal" in refused.output
    assert "Traceback" not in refused.output
    assert admin.acl_entries() == {keep}, "created without a confirmation"
    created = CliRunner().invoke(cli, [*command, "--yes"])
    assert created.exit_code == 0, created.output
    assert "created 22 ACL(s) for User:replicator" in created.output, created.output
    wait_until(lambda: len(admin.acl_entries()) == 23, 30, 0.2,
               what=lambda: f"the ACLs shown: {sorted(map(str, admin.acl_entries()))}")  # fmt: skip
    again = CliRunner().invoke(cli, command)  # nothing newly closed: no question
    assert again.exit_code == 0, again.output
    assert "allow.everyone" not in again.output, again.output
    # A cluster the config says denies by default: nobody but super users is in there now.
    document = yaml.safe_load(config.read_text())
    document["clusters"][scratch.name]["allow_everyone_if_no_acl"] = False
    config.write_text(yaml.safe_dump(document))
    monitor = [*command[: command.index("--role")], "--role", "monitor",
               *command[command.index("--role") + 2 :]]  # fmt: skip
    closed = CliRunner().invoke(cli, monitor)  # every group, topics prefixed 'drkit-': new
    assert closed.exit_code == 0, closed.output
    assert "allow.everyone" not in closed.output and "created" in closed.output, closed.output
