"""The application-history checker (tests/app_history.py) judges histories it is handed the
same way whatever the brokers did: these are its verdicts on written-out histories."""

from __future__ import annotations

from tests.app_history import AppHistory, Read, Write
from tests.invariants import Cluster


def _history(*writes: Write, reads: tuple[Read, ...] = ()) -> AppHistory:
    app = AppHistory("sqlite://", {"a": Cluster("a", "x:1"), "b": Cluster("b", "x:2")},
                     {"a": ("t",), "b": ("t",)}, home="a", group="g")  # fmt: skip
    app.writes.extend(writes)
    app.reads.extend(reads)
    return app


def _ack(sent: float, cluster: str, stretch: int, pointer: str, n: int) -> Write:
    return Write(sent, sent + 0.01, "w", cluster, f"v{n}".encode(), stretch, pointer, 0, n)


def test_the_old_primary_taking_a_write_between_two_of_the_new_ones_is_two_primaries() -> None:
    app = _history(_ack(1.0, "b", 1, "b", 1), _ack(2.0, "a", 1, "b", 2), _ack(3.0, "b", 1, "b", 3))
    app._check_one_primary()
    assert len(app.violations) == 1 and "a acknowledged b'v2'" in app.violations[0]


def test_a_hand_over_and_a_move_back_are_not_two_primaries() -> None:
    app = _history(
        _ack(1.0, "a", 0, "a", 1),
        _ack(2.0, "b", 0, "a", 2),  # the target opened just before the pointer moves
        _ack(3.0, "b", 1, "b", 3),
        _ack(4.0, "a", 1, "b", 4),  # the move back: the old primary opened again ...
        _ack(5.0, "a", 2, "a", 5),  # ... and the pointer follows
    )
    app._check_one_primary()
    assert app.violations == []


def test_refused_writes_are_never_owed_and_acknowledged_ones_always_are() -> None:
    refused = Write(1.0, 1.1, "w", "a", b"no", 0, "a", error="TOPIC_AUTHORIZATION_FAILED")
    read = Read(2.0, "b", "t", 0, 0, b"v1")
    app = _history(refused, _ack(1.0, "a", 0, "a", 1), _ack(1.5, "a", 0, "a", 2), reads=(read,))
    assert [w.value for w in app.unread()] == [b"v2"]
    app.reads.extend([Read(3.0, "b", "t", 0, 1, b"v2"), Read(4.0, "a", "t", 0, 0, b"v1")])
    assert app.unread() == [] and app.rereads() == {"a": 1}
