"""The active pointer: which cluster clients should use, kept in the state store - and
published where clients read it when the store or a data center is gone.

``drkit status`` and ``/api/status`` show it; the engine moves it (``move_pointer``), writes it
as a signed record to the pointer topic of every cluster that answers
(drkit.failover.pointer_topic; the monitor's maintenance writes it where a cluster was away),
and hooks publish it elsewhere (runbooks/hooks/rewrite-client-properties.py rewrites a client
properties file).  The epoch
grows with every move, so a client-side watcher can tell a new decision from a repeated one -
and a record with a lower epoch is never written over a higher one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from drkit.client.pointer_record import PointerRecord
from drkit.config.model import DrkitConfig
from drkit.signing import derive_key
from drkit.store.db import StateStore
from drkit.store.flow_keys import key_for
from drkit.store.guard import WriteGuard, write_session
from drkit.store.models import ActivePointer
from drkit.timestamps import iso_utc

DEFAULT_POINTER = "default"


@dataclass(frozen=True)
class Pointer:
    name: str
    cluster: str
    epoch: int
    run_id: int | None
    updated_at: datetime


def active_cluster(pointer: Pointer | None, config: DrkitConfig) -> str | None:
    """The cluster applications use: the pointer's, else (before any failover) the first
    flow's source, as applications are configured."""
    if pointer is not None:
        return pointer.cluster
    return config.flows[0].source if config.flows else None


class PointerRepository:
    """Reads the pointer; moves it only while ``guard``'s lease is held, when given."""

    def __init__(self, store: StateStore, guard: WriteGuard | None = None) -> None:
        self.store = store
        self.guard = guard

    def get(self, name: str = DEFAULT_POINTER) -> Pointer | None:
        """The pointer, or None when no run ever set it (clients use their configured cluster)."""
        with self.store.session() as session:
            row = session.get(ActivePointer, name)
            if row is None:
                return None
            return Pointer(row.name, row.cluster, row.epoch, row.run_id, row.updated_at)

    def move(self, cluster: str, run_id: int | None, name: str = DEFAULT_POINTER) -> Pointer:
        """Point at ``cluster``; idempotent for the same run (the epoch moves once per run)."""
        with write_session(self.store, self.guard) as session:
            row = session.get(ActivePointer, name, with_for_update=True)
            now = datetime.now(UTC)
            if row is None:
                row = ActivePointer(name=name, cluster=cluster, epoch=1, run_id=run_id)
                session.add(row)
            elif row.cluster != cluster or row.run_id != run_id:
                row.cluster, row.epoch, row.run_id = cluster, row.epoch + 1, run_id
            row.updated_at = now
            session.flush()
            return Pointer(row.name, row.cluster, row.epoch, row.run_id, row.updated_at)


# -- the pointer where clients read it (drkit.client.pointer_record) ------------------------


def pointer_key(config: DrkitConfig, store: StateStore, name: str = DEFAULT_POINTER) -> bytes:
    """The key pointer records are signed with, which applications are given to check them:
    derived from ``signing.secret`` when it is set, else 32 random bytes kept in the store
    (created by the first to ask).  Its own key, under a label no flow name can take (aliases
    hold no ``:``), so a client holding it can sign no flow's record."""
    label = f"pointer:{name}"
    secret = config.signing.secret_bytes
    return derive_key(secret, label) if secret is not None else key_for(store, label)


def pointer_record(pointer: Pointer, config: DrkitConfig) -> PointerRecord:
    """The record clients read for ``pointer``: with every cluster's bootstrap servers."""
    return PointerRecord(
        pointer.name, pointer.cluster, pointer.epoch, pointer.run_id,
        iso_utc(pointer.updated_at),
        {alias: cluster.bootstrap_servers for alias, cluster in config.clusters.items()},
    )  # fmt: skip
