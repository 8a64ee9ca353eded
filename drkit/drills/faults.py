"""Fault injection for drills on the local clusters (``drkit local up``).

* ``kill_brokers``: every broker of the cluster gets SIGKILL (a crash; data on disk stays).
* ``pause``: every broker is frozen (SIGSTOP) - a long GC pause, a hung host or a suspended VM:
  the processes exist, their sockets accept in the kernel's backlog, nothing is ever answered.
* ``blackhole``: iptables DROP of every packet to and from the cluster's client ports, both
  ways - brokers running, every connection (new or open) hangs, nothing is refused.  Needs
  iptables and root; without them the fault is refused (FaultError), never replaced by
  another: a campaign must measure the fault it names.
* ``partial_cut``: a one-way cut - only the brokers' replies are dropped (iptables DROP of the
  packets leaving the client ports), the requests still arrive.  See :data:`REPLIES_ONLY`.
  Needs iptables and root, as ``blackhole``.
* ``network_cut``: a cluster started in its own network namespace (``drkit local up --netns``)
  has its veth link cut - the brokers keep running, nobody outside reaches them.  A cluster on
  loopback gets the next best thing: the blackhole above.  Without either the brokers are
  frozen (SIGSTOP): clients see the same silence.  The report says which was done.

Every fault is undone by :meth:`LocalFaults.restore` (brokers started, thawed, rules removed),
which the drill runner calls in ``finally``: a drill never leaves a cluster broken.

The firewall commands go through ``LocalFaults.run`` (``subprocess.run`` by default), so their
exact arguments are checked without root by a test that records them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from drkit.drills.scenario import FaultKind
from drkit.errors import DrkitError
from drkit.local import LocalKafka


class FaultError(DrkitError):
    """A fault could not be injected (or undone)."""


# (chain, port match) pairs of the DROP rules a fault adds per client port.  On loopback a
# packet passes OUTPUT and then INPUT; matching requests on INPUT and replies on OUTPUT drops
# each direction exactly once.
BOTH_WAYS: tuple[tuple[str, str], ...] = (("INPUT", "--dport"), ("OUTPUT", "--sport"))
# The partial cut: the brokers' replies only.  Requests keep arriving and are processed - a
# produce request is appended, a commit is stored - but no answer, not even the TCP
# handshake's SYN-ACK or an ACK, gets back: open connections go half-open and new ones never
# establish.  This is the asymmetric failure of a broken return route or a one-way firewall
# rule, and the one a single-broker cluster on loopback can have (a cut of some brokers'
# ports needs several brokers): unlike the blackhole the source moves on - it holds writes no
# client saw acknowledged, which the drill's recount must count - and unlike a pause its
# brokers are alive and serving each other and their controller.
REPLIES_ONLY: tuple[tuple[str, str], ...] = (("OUTPUT", "--sport"),)

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def drop_rules(
    ports: Iterable[int], tag: str, directions: Sequence[tuple[str, str]]
) -> list[list[str]]:
    """The iptables rule specifications (after ``-I``/``-D``) that drop TCP on ``ports`` in
    ``directions``, each marked with the comment ``tag`` (``iptables -S | grep <tag>`` finds
    what a drill left).  Pure."""
    return [
        [chain, "-p", "tcp", match, str(port), "-m", "comment", "--comment", tag, "-j", "DROP"]
        for port in ports
        for chain, match in directions
    ]


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


@dataclass
class LocalFaults:
    """Breaks and mends clusters run by ``LocalKafka``."""

    local: LocalKafka
    tag: str  # marks this drill's firewall rules
    run: Runner = _run  # the firewall commands (a test records them)
    which: Callable[[str], str | None] = shutil.which
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
        """Break ``cluster``; returns what was done, in words for the report.  FaultError when
        the fault cannot be injected as named (nothing of it is left in place then)."""
        self.require(cluster)
        if kind is FaultKind.KILL_BROKERS:
            self.local.kill_broker(cluster)
            self._killed.add(cluster)
            return f"{cluster}'s brokers killed (SIGKILL)"
        if kind is FaultKind.PAUSE:
            self._freeze(cluster)
            return f"{cluster}'s brokers paused (SIGSTOP): alive, answering nothing"
        if kind is FaultKind.BLACKHOLE:
            self._drop(cluster, BOTH_WAYS, kind)
            return (
                f"{cluster}'s client ports blackholed (iptables DROP both ways): brokers "
                "running, every connection hangs"
            )
        if kind is FaultKind.PARTIAL_CUT:
            self._drop(cluster, REPLIES_ONLY, kind)
            return (
                f"{cluster} cut one way (iptables DROP of its brokers' replies): requests "
                "arrive and are processed, no answer gets back"
            )
        if kind is FaultKind.NETWORK_CUT:
            return self._network_cut(cluster)
        raise FaultError(f"no fault to inject for {kind.value}")

    def _network_cut(self, cluster: str) -> str:
        namespace = self.local.namespace(cluster)
        if namespace is not None:
            self.local.cut_link(cluster)
            self._cut.add(cluster)
            return (
                f"{cluster}'s link cut: its brokers run in network namespace "
                f"{namespace.name}, whose veth link is down"
            )
        try:
            self._drop(cluster, BOTH_WAYS, FaultKind.NETWORK_CUT)
        except FaultError:  # network_cut's documented fallback (blackhole refuses instead)
            self._freeze(cluster)
            return (
                f"{cluster}'s brokers frozen (SIGSTOP) - no iptables rights here, so the "
                "network cut is simulated by silence"
            )
        return (
            f"{cluster}'s client port blackholed (iptables DROP): brokers running, "
            "every connection hangs"
        )

    def _freeze(self, cluster: str) -> None:
        self.local.freeze_broker(cluster)
        self._frozen.add(cluster)

    def _drop(self, cluster: str, directions: Sequence[tuple[str, str]], kind: FaultKind) -> None:
        """Insert the DROP rules for ``cluster``'s client ports, all or none: FaultError with
        the cause (no iptables; the first refused rule's message, e.g. no root)."""
        if self.which("iptables") is None:
            raise FaultError(f"{kind.value} on {cluster} needs iptables, which is not installed")
        added: list[list[str]] = []
        for rule in drop_rules(self.local.client_ports(cluster), self.tag, directions):
            done = self.run(["iptables", "-I", *rule])
            if done.returncode != 0:
                self._remove(added)
                raise FaultError(
                    f"{kind.value} on {cluster}: iptables refused a rule (needs root): "
                    f"{_first_line(done.stderr or done.stdout or '')}"
                )
            added.append(rule)
        self._rules.extend(added)

    def _remove(self, rules: list[list[str]]) -> list[str]:
        """Delete ``rules`` (newest first, emptying the list); the messages of those iptables
        would not delete."""
        failed: list[str] = []
        while rules:
            rule = rules.pop()
            done = self.run(["iptables", "-D", *rule])
            if done.returncode != 0:
                failed.append(f"{' '.join(rule)}: {_first_line(done.stderr or '')}")
        return failed

    def restore(self) -> list[str]:
        """Undo every fault injected; returns what was undone.  Everything is attempted; a
        firewall rule that could not be deleted is a FaultError afterwards (a cluster left
        cut off would fail the next drill for a reason nobody sees)."""
        undone: list[str] = []
        for cluster in sorted(self._cut):
            self.local.mend_link(cluster)
            undone.append(f"{cluster}'s link restored")
        self._cut.clear()
        failed: list[str] = []
        if self._rules:
            failed = self._remove(self._rules)
            undone.append("firewall rules removed")
        for cluster in sorted(self._frozen):
            self.local.thaw_broker(cluster)
            undone.append(f"{cluster} thawed")
        self._frozen.clear()
        for cluster in sorted(self._killed):
            self.local.start_broker(cluster)
            undone.append(f"{cluster} started")
        self._killed.clear()
        if failed:
            raise FaultError(f"firewall rules left in place ({self.tag}): " + "; ".join(failed))
        return undone
