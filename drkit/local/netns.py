"""A local cluster in its own network namespace: a "data center" whose link can be cut.

The namespace ``dk-<n>`` is joined to the host by a veth pair: ``dkh<n>`` on the host
(10.213.<n>.1/24) and ``dkn<n>`` inside (10.213.<n>.2/24, where the brokers listen for
clients).  The brokers' controller traffic stays on the namespace's own loopback, so a cut
separates the data center from everyone else, never from itself.

Cutting the link (``ip link set dkh<n> down``) is what a lost inter-DC link does: the brokers
keep running, every client outside loses its route to them.  Needs root (CAP_NET_ADMIN) and
iproute2; :func:`available` says whether this machine has both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from drkit.errors import LocalClusterError

SUBNET = "10.213"


@dataclass(frozen=True)
class Namespace:
    index: int

    @property
    def name(self) -> str:
        return f"dk-{self.index}"

    @property
    def host_link(self) -> str:
        return f"dkh{self.index}"

    @property
    def inner_link(self) -> str:
        return f"dkn{self.index}"

    @property
    def address(self) -> str:
        """Where the brokers listen for clients."""
        return f"{SUBNET}.{self.index}.2"

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise LocalClusterError(f"ip {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done


def available() -> bool:
    """Root and iproute2 with network namespaces."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        return False
    return _ip("netns", "list", check=False).returncode == 0


def _taken() -> set[int]:
    listed = _ip("netns", "list", check=False).stdout.split()
    return {int(word[3:]) for word in listed if word.startswith("dk-") and word[3:].isdigit()}


def create(index: int | None = None) -> Namespace:
    """A new namespace (the first free index, or ``index``) with its link up; raises
    LocalClusterError naming the failed step (and leaves nothing half made).

    ``ip netns add`` is the claim: another process (a parallel test worker) that took the same
    free index first makes it fail, and the next index is tried - never removing a namespace
    this call did not make."""
    candidates = [index] if index is not None else [i for i in range(1, 250) if i not in _taken()]
    for candidate in candidates:
        ns = Namespace(candidate)
        try:
            _ip("netns", "add", ns.name)
        except LocalClusterError:
            if index is not None:
                raise
            continue  # claimed meanwhile
        try:
            _link(ns)
        except LocalClusterError:
            remove(ns)
            raise
        return ns
    raise LocalClusterError("no free 10.213.<n>.0/24 network for another namespace")


def _link(ns: Namespace) -> None:
    """The veth pair and addresses of a namespace just added."""
    _ip("link", "add", ns.host_link, "type", "veth", "peer", "name", ns.inner_link)
    _ip("link", "set", ns.inner_link, "netns", ns.name)
    _ip("addr", "add", f"{SUBNET}.{ns.index}.1/24", "dev", ns.host_link)
    _ip("link", "set", ns.host_link, "up")
    inside = ["netns", "exec", ns.name, "ip"]
    _ip(*inside, "addr", "add", f"{ns.address}/24", "dev", ns.inner_link)
    _ip(*inside, "link", "set", ns.inner_link, "up")
    _ip(*inside, "link", "set", "lo", "up")


def ensure(ns: Namespace) -> None:
    """Re-create a namespace that vanished (a reboot) with the same index."""
    if ns.index not in _taken():
        create(ns.index)


def cut(ns: Namespace) -> None:
    _ip("link", "set", ns.host_link, "down")


def mend(ns: Namespace) -> None:
    _ip("link", "set", ns.host_link, "up")


def remove(ns: Namespace) -> None:
    """Delete the namespace (its veth pair goes with it); idempotent."""
    _ip("netns", "delete", ns.name, check=False)
    _ip("link", "delete", ns.host_link, check=False)
