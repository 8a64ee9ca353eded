"""Each flow's signing key (drkit/signing.py): derived from ``signing.secret``, or kept in
the state store.

With ``signing.secret`` configured every process derives the same key (:func:`keys_of`): no
store involved, and a lost or replaced store loses no key.  Without it the key is random and
created on first need by whoever writes or reads first - a replication worker, the CLI, the
failover engine - race-safe: each candidate inserts 32 fresh random bytes, a primary-key
conflict means another process won, and every process then uses the stored key.  Either way the
key is a secret: it is never logged or printed, and it never goes to a cluster.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import overload

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from drkit.config.model import DrkitConfig
from drkit.signing import KEY_BYTES, Kind, Signer, derive_key
from drkit.store.db import StateStore
from drkit.store.models import FlowKey

KeySource = Callable[[], bytes]


@overload
def keys_of(config: DrkitConfig, store: StateStore) -> Callable[[str], bytes]: ...


@overload
def keys_of(config: DrkitConfig, store: None) -> Callable[[str], bytes] | None: ...


def keys_of(config: DrkitConfig, store: StateStore | None) -> Callable[[str], bytes] | None:
    """Each flow's key by name, as this deployment keeps them: derived from
    ``config.signing.secret`` when it is set, else the stored key (:func:`key_for`); None when
    there is neither (no secret and no store: nothing can be signed or verified)."""
    secret = config.signing.secret_bytes
    if secret is not None:
        return lambda flow: derive_key(secret, flow)
    if store is None:
        return None
    return lambda flow: key_for(store, flow)


def control_keys(store: StateStore) -> Callable[[str], bytes]:
    """Each flow's key for its control channel (directives and acks): always the store's own
    key, even with ``signing.secret``.  A directive's epoch counts in its store: a new store
    starts again at 1, and a directive or ack signed under an earlier store (replayed by a
    foreign writer, or a silent worker's old ack) must not verify there and outrank it."""
    return lambda flow: key_for(store, flow)


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

    def __init__(
        self, store_of: Callable[[], StateStore], flow: str, secret: bytes | None = None
    ) -> None:
        """``secret``: the configured signing secret - the key is derived from it and the
        store is never asked."""
        self._store_of = store_of
        self.flow = flow
        self._key: bytes | None = derive_key(secret, flow) if secret is not None else None
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
    """Every flow's key, each read once (a long-running process: the replicator, the
    checkpoint worker): derived from ``secret`` when given, else from the store at ``url``,
    opened - and migrated to head, as a long-running command does - on first use; its errors
    are StateStoreError.  Thread-safe."""

    def __init__(self, url: str | None, secret: bytes | None = None) -> None:
        if url is None and secret is None:
            raise ValueError("flow keys need a signing secret or a state store")
        self.url = url
        self._secret = secret
        self._store: StateStore | None = None
        self._keys: dict[str, StoredKey] = {}
        self._control: dict[str, StoredKey] = {}
        self._lock = threading.Lock()

    def _open(self) -> StateStore:
        with self._lock:
            if self._store is None:
                assert self.url is not None  # with no url every key is derived
                store = StateStore(self.url)
                store.ensure_current()
                self._store = store
            return self._store

    def of(self, flow: str) -> StoredKey:
        with self._lock:
            found = self._keys.get(flow)
            if found is None:
                found = self._keys[flow] = StoredKey(self._open, flow, self._secret)
            return found

    def signer(self, flow: str, kind: Kind) -> Signer:
        """``flow``'s signer for ``kind`` (reads the store the first time)."""
        return self.of(flow).signer(kind)

    def control(self, flow: str) -> StoredKey:
        """``flow``'s control-channel key: the store's own, never derived (see
        :func:`control_keys`); needs the store URL."""
        with self._lock:
            found = self._control.get(flow)
            if found is None:
                found = self._control[flow] = StoredKey(self._open, flow)
            return found

    def __repr__(self) -> str:
        return "FlowKeys(...)"
