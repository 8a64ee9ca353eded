"""Drill faults (issue 50): the exact firewall rules each kind adds, all-or-none insertion, a
refusal with its cause instead of a silent fallback, and restore undoing exactly what was done
- without root: the command runner and the local clusters are recorded, not run."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from drkit.drills.faults import BOTH_WAYS, REPLIES_ONLY, FaultError, LocalFaults, drop_rules
from drkit.drills.scenario import FaultKind, Scenario
from drkit.local import LocalKafka

TAG = "drkit-d1"


@dataclass
class FakeLocal:
    """What LocalFaults calls on a LocalKafka, recorded: one cluster dc1 with two brokers."""

    ports: list[int] = field(default_factory=lambda: [19092, 19093])
    calls: list[tuple[str, str]] = field(default_factory=list)

    def cluster_names(self) -> list[str]:
        return ["dc1", "dc2"]

    def client_ports(self, name: str) -> list[int]:
        return self.ports

    def namespace(self, name: str) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if name in ("kill_broker", "start_broker", "freeze_broker", "thaw_broker"):
            return lambda cluster: self.calls.append((name, cluster))
        raise AttributeError(name)


@dataclass
class FakeIptables:
    """Records every command; refuses the ``refuse_at``-th (1-based) with ``message``."""

    refuse_at: int | None = None
    message: str = "iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: " \
        "Permission denied (you must be root)\n"  # fmt: skip
    commands: list[list[str]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(argv))
        refused = len(self.commands) == self.refuse_at
        return subprocess.CompletedProcess(
            list(argv), 1 if refused else 0, "", self.message if refused else ""
        )


def faults(
    iptables: FakeIptables, local: FakeLocal | None = None, installed: bool = True
) -> LocalFaults:
    return LocalFaults(
        cast(LocalKafka, local or FakeLocal()),
        TAG,
        run=iptables,
        which=lambda _name: "/usr/sbin/iptables" if installed else None,
    )


def rule(chain: str, match: str, port: int) -> list[str]:
    return [chain, "-p", "tcp", match, str(port), "-m", "comment", "--comment", TAG, "-j", "DROP"]


def test_a_blackhole_drops_both_ways_on_every_client_port_and_restore_deletes_exactly_those() -> (
    None
):
    iptables = FakeIptables()
    broken = faults(iptables)
    how = broken.inject(FaultKind.BLACKHOLE, "dc1")
    added = [
        rule("INPUT", "--dport", 19092), rule("OUTPUT", "--sport", 19092),
        rule("INPUT", "--dport", 19093), rule("OUTPUT", "--sport", 19093),
    ]  # fmt: skip
    assert iptables.commands == [["iptables", "-I", *r] for r in added]
    assert "blackholed" in how
    iptables.commands.clear()
    assert broken.restore() == ["firewall rules removed"]
    assert iptables.commands == [["iptables", "-D", *r] for r in reversed(added)]
    iptables.commands.clear()
    assert broken.restore() == [] and iptables.commands == []  # undone once


def test_a_partial_cut_drops_only_the_brokers_replies() -> None:
    iptables = FakeIptables()
    broken = faults(iptables, FakeLocal(ports=[29092]))
    how = broken.inject(FaultKind.PARTIAL_CUT, "dc1")
    assert iptables.commands == [["iptables", "-I", *rule("OUTPUT", "--sport", 29092)]]
    assert "one way" in how
    iptables.commands.clear()
    broken.restore()
    assert iptables.commands == [["iptables", "-D", *rule("OUTPUT", "--sport", 29092)]]


def test_drop_rules_is_per_port_per_direction() -> None:
    assert drop_rules([1, 2], TAG, REPLIES_ONLY) == [
        rule("OUTPUT", "--sport", 1), rule("OUTPUT", "--sport", 2)
    ]  # fmt: skip
    assert len(drop_rules([1, 2, 3], TAG, BOTH_WAYS)) == 6


@pytest.mark.parametrize("kind", [FaultKind.BLACKHOLE, FaultKind.PARTIAL_CUT])
def test_without_root_the_fault_is_refused_with_the_cause_and_nothing_is_left(
    kind: FaultKind,
) -> None:
    iptables = FakeIptables(refuse_at=2 if kind is FaultKind.BLACKHOLE else 1)
    local = FakeLocal()
    broken = faults(iptables, local)
    with pytest.raises(FaultError) as caught:
        broken.inject(kind, "dc1")
    message = str(caught.value)
    assert "\n" not in message and "you must be root" in message and kind.value in message
    # The rule inserted before the refusal is deleted at once; no fallback froze the brokers.
    inserted = [c for c in iptables.commands if c[1] == "-I"][:-1]
    deleted = [c for c in iptables.commands if c[1] == "-D"]
    assert [c[2:] for c in deleted] == [c[2:] for c in reversed(inserted)]
    assert local.calls == []
    iptables.commands.clear()
    assert broken.restore() == [] and iptables.commands == []


def test_without_iptables_a_blackhole_is_refused_but_a_network_cut_freezes_as_before() -> None:
    iptables = FakeIptables()
    local = FakeLocal()
    broken = faults(iptables, local, installed=False)
    with pytest.raises(FaultError, match="blackhole on dc1 needs iptables"):
        broken.inject(FaultKind.BLACKHOLE, "dc1")
    assert "frozen (SIGSTOP)" in broken.inject(FaultKind.NETWORK_CUT, "dc1")
    assert local.calls == [("freeze_broker", "dc1")] and iptables.commands == []
    assert broken.restore() == ["dc1 thawed"]


def test_a_network_cut_on_loopback_blackholes_both_ways_as_before() -> None:
    iptables = FakeIptables()
    broken = faults(iptables, FakeLocal(ports=[1]))
    assert "blackholed" in broken.inject(FaultKind.NETWORK_CUT, "dc1")
    assert [c[2:] for c in iptables.commands] == drop_rules([1], TAG, BOTH_WAYS)


def test_a_pause_freezes_and_restore_thaws_once() -> None:
    local = FakeLocal()
    broken = faults(FakeIptables(), local)
    assert "SIGSTOP" in broken.inject(FaultKind.PAUSE, "dc1")
    assert broken.restore() == ["dc1 thawed"]
    assert broken.restore() == []
    assert local.calls == [("freeze_broker", "dc1"), ("thaw_broker", "dc1")]


def test_a_rule_that_will_not_go_is_an_error_after_everything_else_was_undone() -> None:
    iptables = FakeIptables()
    local = FakeLocal(ports=[1])
    broken = faults(iptables, local)
    broken.inject(FaultKind.PARTIAL_CUT, "dc1")
    broken.inject(FaultKind.PAUSE, "dc2")
    iptables.refuse_at = len(iptables.commands) + 1
    iptables.message = "iptables: Bad rule (does a matching rule exist in that chain?).\n"
    with pytest.raises(FaultError, match=f"firewall rules left in place \\({TAG}\\).*Bad rule"):
        broken.restore()
    assert ("thaw_broker", "dc2") in local.calls


@pytest.mark.parametrize("kind", ["pause", "blackhole", "partial_cut"])
def test_a_scenario_may_name_each_new_kind(kind: str) -> None:
    scenario = Scenario.model_validate({
        "name": "s", "title": "t", "workload": {"topics": [{"name": "orders"}]},
        "fault": {"kind": kind}, "policy": {"rto_s": 60},
    })  # fmt: skip
    assert scenario.fault.kind.value == kind and not scenario.planned
