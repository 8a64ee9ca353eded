"""The drill's numbered records (pure, no client library): writers put ``seq=N;`` at the
start of every value, so a record is recognised on either cluster without trusting drkit's own
headers; a group member's ledger says which of them it processed, where."""

from __future__ import annotations

from dataclasses import dataclass


def encode_value(seq: int, size: int) -> bytes:
    head = f"seq={seq};".encode()
    return head + b"x" * max(0, size - len(head))


def decode_seq(value: bytes | None) -> int | None:
    """The writer's sequence number in a value, or None for a foreign record."""
    if not value or not value.startswith(b"seq="):
        return None
    end = value.find(b";")
    try:
        return int(value[4:end])
    except ValueError:
        return None


@dataclass(frozen=True)
class Processed:
    """One record a group processed (and committed): where, and which writer record."""

    at: float  # wall time of the commit
    cluster: str
    topic: str
    partition: int
    offset: int
    seq: int | None
