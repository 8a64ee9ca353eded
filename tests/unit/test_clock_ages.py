"""Ages of moments other hosts stamped (drkit.clock.age_s): a skew is unknown, never 0."""

from __future__ import annotations

from drkit.clock import SKEW_TOLERANCE_S, age_s
from drkit.offsets.checkpoint_store import CheckpointSnapshot


def test_an_age_is_the_difference_and_a_few_ms_ahead_is_just_now() -> None:
    assert age_s(100.0, 58.0) == 42.0
    assert age_s(100.0, 100.0 + SKEW_TOLERANCE_S / 2) == 0.0


def test_a_moment_well_in_the_future_is_an_unknown_age_not_zero() -> None:
    """Issue 44, finding 11: main clamped a negative age to 0 - "fresh" - when a host's clock
    ran ahead, exactly when the age meant nothing."""
    assert age_s(100.0, 130.0) is None


def test_a_checkpoint_round_stamped_by_a_clock_ahead_has_no_age() -> None:
    snapshot = CheckpointSnapshot({}, last_tick_ms=130_000)
    assert snapshot.age_s(now=100.0) is None
    assert CheckpointSnapshot({}, last_tick_ms=58_000).age_s(now=100.0) == 42.0
