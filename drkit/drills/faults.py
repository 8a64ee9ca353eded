"""Fault injection for drills on the local clusters (``drkit local up``).

* ``kill_brokers``: every broker of the cluster gets SIGKILL (a crash; data on disk stays).
* ``network_cut``: a cluster started in its own network namespace (``drkit local up --netns``)
  has its veth link cut - the brokers keep running, nobody outside reaches them.  A cluster on
  loopback gets the next best thing: packets to its client ports are dropped (iptables, needs
  root), so every connection hangs.  Without either the brokers are frozen (SIGSTOP): clients
  see the same silence.  The report says which was done.

Every fault is undone by :meth:`LocalFaults.restore` (brokers started, thawed, rules removed),
which the drill runner calls in ``finally``: a drill never leaves a cluster broken.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from drkit.drills.scenario import FaultKind
from drkit.errors import DrkitError
from drkit.local import LocalKafka


class FaultError(DrkitError):
    """A fault could not be injected (or undone)."""


@dataclass
class LocalFaults:
    """Breaks and mends clusters run by ``LocalKafka``."""

    local: LocalKafka
    tag: str  # marks this drill's firewall rules
    _killed: set[str] = field(default_factory=set)
    _frozen: set[str] = field(default_factory=set)
    _cut: set[str] = field(default_factory=set)
    _rules: list[list[str]] = field(default_factory=list)

    def require(self, cluster: str) -> None:
        if cluster not in self.local.cluster_names():
            raise FaultError(
                f"cluster {cluster!r} is not a local cluster (drkit local up): drills inject "
                "faults only into local clusters"
            )

    def inject(self, kind: FaultKind, cluster: str) -> str:
        """Break ``cluster``; returns what was done, in words for the report."""
        self.require(cluster)
        if kind is FaultKind.KILL_BROKERS:
            self.local.kill_broker(cluster)
            self._killed.add(cluster)
            return f"{cluster}'s brokers killed (SIGKILL)"
        if kind is FaultKind.NETWORK_CUT:
            namespace = self.local.namespace(cluster)
            if namespace is not None:
                self.local.cut_link(cluster)
                self._cut.add(cluster)
                return (
                    f"{cluster}'s link cut: its brokers run in network namespace "
                    f"{namespace.name}, whose veth link is down"
                )
            if self._blackhole(cluster):
                return (
                    f"{cluster}'s client port blackholed (iptables DROP): brokers running, "
                    "every connection hangs"
                )
            self.local.freeze_broker(cluster)
            self._frozen.add(cluster)
            return (
                f"{cluster}'s brokers frozen (SIGSTOP) - no iptables rights here, so the "
                "network cut is simulated by silence"
            )
        raise FaultError(f"no fault to inject for {kind.value}")

    def _blackhole(self, cluster: str) -> bool:
        if shutil.which("iptables") is None:
            return False
        for port in self.local.client_ports(cluster):
            for chain, match in (("INPUT", "--dport"), ("OUTPUT", "--sport")):
                rule = [chain, "-p", "tcp", match, str(port), "-m", "comment"]
                rule += ["--comment", self.tag, "-j", "DROP"]
                done = subprocess.run(
                    ["iptables", "-I", *rule], capture_output=True, text=True, check=False
                )
                if done.returncode != 0:
                    self._unblock()
                    return False
                self._rules.append(rule)
        return True

    def _unblock(self) -> None:
        while self._rules:
            rule = self._rules.pop()
            subprocess.run(["iptables", "-D", *rule], capture_output=True, check=False)

    def restore(self) -> list[str]:
        """Undo every fault injected; returns what was undone."""
        undone: list[str] = []
        for cluster in sorted(self._cut):
            self.local.mend_link(cluster)
            undone.append(f"{cluster}'s link restored")
        self._cut.clear()
        if self._rules:
            self._unblock()
            undone.append("firewall rules removed")
        for cluster in sorted(self._frozen):
            self.local.thaw_broker(cluster)
            undone.append(f"{cluster} thawed")
        self._frozen.clear()
        for cluster in sorted(self._killed):
            self.local.start_broker(cluster)
            undone.append(f"{cluster} started")
        self._killed.clear()
        return undone
