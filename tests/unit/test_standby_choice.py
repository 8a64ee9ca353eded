"""The best standby of a source (drkit.failover.standby_choice, pure; issue 48 item 1)."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.failover.standby_choice import StandbyCandidate, StandbyOutcome, choose


def _healthy(target: str, records: int | None, seconds: float | None = 1.0) -> StandbyCandidate:
    return StandbyCandidate(target, True, "HEALTHY by 2 of 2 observers", records, seconds)


def test_the_fewest_records_behind_wins_and_the_other_is_listed_with_its_figures() -> None:
    choice = choose("dc1", [_healthy("dc2", 120, 9.0), _healthy("dc3", 0, 1.0)])
    assert choice.chosen is not None and choice.chosen.target == "dc3"
    lost = choice.verdict_of("dc2")
    assert lost.outcome is StandbyOutcome.LOST
    assert "9.0s" in lost.why and "dc3" in lost.why
    assert "120 records" in lost.line()  # its figures, beside why it lost
    document = choice.to_json()
    assert document["chosen"] == "dc3"
    assert [c["cluster"] for c in document["candidates"]] == ["dc3", "dc2"]
    assert (
        document["candidates"][1] | {"outcome": "lost", "rpo_records": 120, "rpo_s": 9.0}
        == (document["candidates"][1])
    )


def test_the_younger_evidence_wins_over_fewer_records_counted() -> None:
    """A paused flow's workers saw an older source end: it may count fewer records (0 here,
    against the end it saw) while lacking everything written since - its evidence is older."""
    choice = choose("dc1", [_healthy("dc2", 0, 40.0), _healthy("dc3", 12, 1.5)])
    assert choice.chosen is not None and choice.chosen.target == "dc3"
    assert "older evidence" in choice.verdict_of("dc2").why


def test_equal_evidence_the_fewest_records_win() -> None:
    choice = choose("dc1", [_healthy("dc2", 5, 2.0), _healthy("dc3", 4, 2.0)])
    assert choice.chosen is not None and choice.chosen.target == "dc3"
    assert "more records behind" in choice.verdict_of("dc2").why


def test_a_tie_goes_to_the_first_name_whatever_the_order_given() -> None:
    for order in (["dc3", "dc2"], ["dc2", "dc3"]):
        choice = choose("dc1", [_healthy(name, 0, 1.0) for name in order])
        assert choice.chosen is not None and choice.chosen.target == "dc2"
        assert "alphabetical" in choice.verdict_of("dc2").why
        assert "alphabetical" in choice.verdict_of("dc3").why


def test_an_unknown_rpo_ranks_below_any_known_one() -> None:
    choice = choose("dc1", [_healthy("dc2", None, 0.1), _healthy("dc3", 10_000, 300.0)])
    assert choice.chosen is not None and choice.chosen.target == "dc3"
    assert "unknown" in choice.verdict_of("dc2").why
    seconds = choose("dc1", [_healthy("dc2", 0, None), _healthy("dc3", 900, 300.0)])
    assert seconds.chosen is not None and seconds.chosen.target == "dc3"
    assert "unknown" in seconds.verdict_of("dc2").why


def test_an_unhealthy_or_blocked_candidate_is_excluded_with_its_reason() -> None:
    down = StandbyCandidate("dc2", False, "UNAVAILABLE by 2 of 2 observers", 0, 0.1)
    blocked = StandbyCandidate(
        "dc4", True, "HEALTHY", 0, 0.1, "the plan is blocked: a run is unfinished"
    )
    choice = choose("dc1", [down, blocked, _healthy("dc3", 50, 20.0)])
    assert choice.chosen is not None and choice.chosen.target == "dc3"
    assert choice.verdict_of("dc2").outcome is StandbyOutcome.EXCLUDED
    assert "UNAVAILABLE" in choice.verdict_of("dc2").why
    assert choice.verdict_of("dc4").why == "the plan is blocked: a run is unfinished"
    assert "dc2" in choice.summary() and "dc4" in choice.summary()


def test_no_candidate_left_says_why() -> None:
    down = StandbyCandidate("dc2", False, "UNKNOWN: no monitor reported it", 0, 0.1)
    choice = choose("dc1", [down])
    assert choice.chosen is None
    assert "dc2" in choice.why_none() and "no monitor" in choice.why_none()
    assert choice.to_json()["chosen"] is None
    empty = choose("dc1", [])
    assert empty.chosen is None and "no flow replicates dc1" in empty.why_none()


def test_one_candidate_per_standby() -> None:
    with pytest.raises(ValueError):
        choose("dc1", [_healthy("dc2", 0), _healthy("dc2", 1)])


CANDIDATES = st.lists(
    st.builds(
        StandbyCandidate,
        st.sampled_from(["dc2", "dc3", "dc4", "dc5"]),
        st.booleans(),
        st.just("health"),
        st.none() | st.integers(0, 3),
        st.none() | st.sampled_from([0.0, 1.0, 2.5]),
        st.none() | st.just("blocked"),
    ),
    unique_by=lambda c: c.target,
)


@given(CANDIDATES, st.randoms())
def test_the_choice_is_eligible_ranks_first_and_ignores_the_order(
    candidates: list[StandbyCandidate], random: Random
) -> None:
    choice = choose("dc1", candidates)
    shuffled = list(candidates)
    random.shuffle(shuffled)
    assert choose("dc1", shuffled) == choice
    eligible = [c for c in candidates if c.healthy and c.excluded_because is None]
    assert len(choice.verdicts) == len(candidates)
    if not eligible:
        assert choice.chosen is None and choice.why_none()
        return
    assert choice.chosen is not None and choice.chosen in eligible
    assert all(choice.chosen.rank() <= c.rank() for c in eligible)
    if any(c.rpo_known for c in eligible):  # unknown never beats known
        assert choice.chosen.rpo_known
