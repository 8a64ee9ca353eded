"""Record signatures: offset syncs, adopted ranges and flow directives a foreign writer
cannot forge.

On a cluster without ACLs any client can write drkit's bookkeeping topics.  A forged offset
sync would make a failover commit wrong consumer positions; a forged directive would pause or
start a flow.  So drkit's own writers put an HMAC-SHA256 of the record in a header
(:data:`MAC_HEADER`), keyed by a per-flow 32-byte key that never goes to a cluster - derived
from the configured ``signing.secret`` (:func:`derive_key`), or else random bytes kept in the
state store (drkit/store/flow_keys.py); readers that drive decisions drop a record whose MAC is
missing or wrong, and count it.

The MAC covers a domain-separated message - a format tag, the record kind, the flow name, the
record key and the value (a tombstone's absent value is encoded apart from an empty one) - each
length-prefixed, so no two (kind, flow, key, value) share a message.

What it does not do: it authenticates drkit's writers against foreign ones, nothing more.  A
foreign writer can still *delete* (compact away) or *replay* a record drkit signed for the same
flow and key - replaying a run's older, shorter version, or an older directive - and can flood
the topic.  Readers that have no store (the Spark accounting job) do not verify.

Pure: no I/O.  The key is never printed: :class:`Signer`'s repr hides it.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

MAC_HEADER = "drkit-mac"
KEY_BYTES = 32
_FORMAT = b"drkit-mac/v1"
_KEY_LABEL = b"drkit-flow-key/v1"


class Kind(StrEnum):
    """What a signed record is: the MAC of one kind never verifies as another."""

    OFFSET_SYNC = "offset-sync"
    CONTROL = "control"
    ADOPTED = "adopted"  # drkit adopt's MirrorMaker 2 range (drkit/adoption/adopted.py)
    POINTER = "pointer"  # the active pointer clients follow (drkit/client/pointer_record.py)


def _field(data: bytes | None) -> bytes:
    if data is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(data)) + data


def _prefix(kind: Kind, flow: str) -> bytes:
    return _field(_FORMAT) + _field(kind.value.encode()) + _field(flow.encode())


def message(kind: Kind, flow: str, key: bytes | None, value: bytes | None) -> bytes:
    """What is signed: every part length-prefixed (a None part apart from an empty one)."""
    return _prefix(kind, flow) + _field(key) + _field(value)


def sign(secret: bytes, kind: Kind, flow: str, key: bytes | None, value: bytes | None) -> bytes:
    """The MAC of one record (32 bytes)."""
    return hmac.digest(secret, message(kind, flow, key, value), hashlib.sha256)


def verify(
    secret: bytes,
    kind: Kind,
    flow: str,
    key: bytes | None,
    value: bytes | None,
    mac: bytes | None,
) -> bool:
    """Whether ``mac`` is the record's MAC (constant-time); a missing MAC never is."""
    if not mac:
        return False
    return hmac.compare_digest(sign(secret, kind, flow, key, value), mac)


def derive_key(secret: bytes, flow: str) -> bytes:
    """``flow``'s key derived from a configured signing secret (``signing.secret``): an
    HMAC-SHA256 of a domain-separated label and the flow name - every process with the same
    secret derives the same key, with no store (a lost or replaced store loses nothing)."""
    return hmac.digest(secret, _field(_KEY_LABEL) + _field(flow.encode()), hashlib.sha256)


def mac_of(headers: Iterable[tuple[str, bytes | None]] | None) -> bytes | None:
    """The record's MAC header (the last one, as Kafka clients read headers), or None."""
    found: bytes | None = None
    for name, data in headers or ():
        if name == MAC_HEADER:
            found = data
    return found


@dataclass(frozen=True)
class Signer:
    """One flow's key for one kind of record: signs what drkit writes, checks what it reads."""

    secret: bytes = field(repr=False)
    kind: Kind
    flow: str

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_BYTES:
            raise ValueError(f"a flow key is {KEY_BYTES} bytes")
        # The keyed HMAC with the message's fixed head absorbed once, copied per record: a
        # reader checks up to a million runs for one failover plan, and re-keying per record
        # (hmac.digest) cost 4x as much.
        keyed = hmac.new(self.secret, _prefix(self.kind, self.flow), hashlib.sha256)
        object.__setattr__(self, "_keyed", keyed)

    def of_kind(self, kind: Kind) -> Signer:
        """The same flow key for another kind of record (domain-separated by the kind)."""
        return Signer(self.secret, kind, self.flow)

    def mac(self, key: bytes | None, value: bytes | None) -> bytes:
        """:func:`sign` for this signer's key, kind and flow (the same bytes)."""
        record = self._keyed.copy()  # type: ignore[attr-defined]
        record.update(_field(key) + _field(value))
        digest: bytes = record.digest()
        return digest

    def header(self, key: bytes | None, value: bytes | None) -> tuple[str, bytes]:
        """The header to write with the record."""
        return (MAC_HEADER, self.mac(key, value))

    def accepts(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] | None,
    ) -> bool:
        mac = mac_of(headers)
        return bool(mac) and hmac.compare_digest(self.mac(key, value), mac)  # type: ignore[arg-type]
