"""``offsets translate --verify``: the exact check (pure) and what the flow leaves out."""

from __future__ import annotations

import pytest

from drkit.config.model import TransformConfig
from drkit.offsets.verification import AtTarget, PositionVerdict, replicated_by, verify
from drkit.records import Record
from drkit.replication.provenance import ORIGIN_HEADER
from drkit.topology.transforms import build_chain


@pytest.mark.parametrize(
    ("expected", "at_target", "replicated_end", "verdict"),
    [
        (50, AtTarget(55, 50), 100, PositionVerdict.MATCH),
        # The old check ("the copy at T comes from >= S") passed this: 50..59 skipped.
        (50, AtTarget(65, 60), 100, PositionVerdict.SKIPS),
        (50, AtTarget(45, 40), 100, PositionVerdict.REREADS),
        (50, AtTarget(45, None), 100, PositionVerdict.FOREIGN),
        # Nothing at T: right only when the expected record is not on the target yet.
        (50, None, 40, PositionVerdict.MATCH),
        (50, None, 100, PositionVerdict.SKIPS),
        (50, None, None, PositionVerdict.UNVERIFIABLE),
        # The source has nothing left to read at S.
        (None, None, 100, PositionVerdict.MATCH),
        (None, AtTarget(99, 98), 100, PositionVerdict.REREADS),
    ],
)
def test_verify_compares_the_first_records_after_s_and_after_t(
    expected: int | None,
    at_target: AtTarget | None,
    replicated_end: int | None,
    verdict: PositionVerdict,
) -> None:
    assert verify(expected, at_target, replicated_end) is verdict


def record(key: bytes, origin: bytes | None = None) -> Record:
    headers = ((ORIGIN_HEADER, origin),) if origin is not None else ()
    return Record("orders", 0, 7, key, b"v", headers)


def test_records_the_flow_leaves_out_are_not_expected_on_the_target() -> None:
    chain = build_chain([TransformConfig(type="filter", options={"key_regex": "^drop"})])
    replicated = replicated_by(chain, "src-id", "tgt-id")
    assert replicated(record(b"keep"))
    assert not replicated(record(b"drop-me"))
    # A drkit copy from the target sitting where drkit wrote it is a loop: not replicated back.
    assert not replicated(record(b"keep", b"tgt-id/src-id/orders"))
    # The same header copied by an application into another topic is new data.
    assert replicated(record(b"keep", b"tgt-id/src-id/other-topic"))
