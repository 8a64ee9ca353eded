"""Each flow's signing key (drkit/signing.py), kept in the state store.

Created on first need by whoever writes or reads first - a replication worker, the CLI, the
failover engine - race-safe: each candidate inserts 32 fresh random bytes, a primary-key
conflict means another process won, and every process then uses the stored key.  The key is a
secret: it is never logged or printed, and it never goes to a cluster.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from drkit.signing import KEY_BYTES, Kind, Signer
from drkit.store.db import StateStore
from drkit.store.models import FlowKey

KeySource = Callable[[], bytes]


def key_for(store: StateStore, flow: str) -> bytes:
    """``flow``'s key: the stored one, created first if there is none (StateStoreError when
    the store does not answer)."""
    found = _stored(store, flow)
    return found if found is not None else create_key(store, flow)


def create_key(store: StateStore, flow: str) -> bytes:
    """Insert a fresh key for ``flow`` unless one is stored; the stored one either way (a
    primary-key conflict: another process created it first, and theirs is the key)."""
    try:
        with store.session() as session:
            session.add(FlowKey(flow=flow, secret=secrets.token_bytes(KEY_BYTES)))
    except IntegrityError:
        pass
    found = _stored(store, flow)
    if found is None:  # pragma: no cover - inserted or conflicting, a row is there
        raise RuntimeError(f"flow {flow}: no key after creating one")
    return found


def _stored(store: StateStore, flow: str) -> bytes | None:
    with store.session() as session:
        secret = session.scalar(select(FlowKey.secret).where(FlowKey.flow == flow))
    return bytes(secret) if secret is not None else None


class StoredKey:
    """A flow's key read from the store once, on first use, then kept in memory (a worker
    reads it while the store answers and keeps signing and checking through an outage).
    Thread-safe.  ``store_of``: the store, opened lazily and current (migrated)."""

    def __init__(self, store_of: Callable[[], StateStore], flow: str) -> None:
        self._store_of = store_of
        self.flow = flow
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = key_for(self._store_of(), self.flow)
            return self._key

    def __repr__(self) -> str:
        return f"StoredKey({self.flow!r})"

    def signer(self, kind: Kind) -> Signer:
        return Signer(self(), kind, self.flow)


class FlowKeys:
    """Every flow's key from one store URL, each read once (a long-running process: the
    replicator, the checkpoint worker).  The store is opened - and migrated to head, as a
    long-running command does - on first use; its errors are StateStoreError.  Thread-safe."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._store: StateStore | None = None
        self._keys: dict[str, StoredKey] = {}
        self._lock = threading.Lock()

    def _open(self) -> StateStore:
        with self._lock:
            if self._store is None:
                store = StateStore(self.url)
                store.ensure_current()
                self._store = store
            return self._store

    def of(self, flow: str) -> StoredKey:
        with self._lock:
            found = self._keys.get(flow)
            if found is None:
                found = self._keys[flow] = StoredKey(self._open, flow)
            return found

    def signer(self, flow: str, kind: Kind) -> Signer:
        """``flow``'s signer for ``kind`` (reads the store the first time)."""
        return self.of(flow).signer(kind)

    def __repr__(self) -> str:
        return "FlowKeys(...)"
