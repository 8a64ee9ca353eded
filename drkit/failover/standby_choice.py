"""Which standby an unplanned failover of a source promotes, and why (pure).

A source replicated to several clusters (dc1 -> dc2 and dc1 -> dc3) can fail over to any of
them.  :func:`choose` takes one :class:`StandbyCandidate` per flow out of the source - each with how
the monitors' quorum sees it and the RPO its failover plan estimates (records the target lacks,
the worst partition's age of evidence: ``drkit.automation.runner.rpo_of``, the same figures
``drkit failover --plan`` prints and automation judges) - and returns a :class:`StandbyChoice`
that names the chosen one and, for every other, why it lost or was left out.

The rules, in order:

* a candidate that is not HEALTHY by the quorum of observers, or that has another reason to be
  left out (its plan is blocked, its automatic decision does not act), is *excluded*, with that
  reason - never chosen, whatever its RPO;
* among the rest, a candidate whose RPO is unknown - records or seconds - ranks below every
  one whose RPO is known (unknown may be anything);
* the youngest evidence of how far replication got (the plan's seconds, its worst partition)
  wins: with the source gone, each flow's record count is against the source end *its own*
  workers last saw - a paused or slow flow's workers saw an older end, so it may count fewer
  records while lacking more - whereas the seconds of every candidate are aged to one moment
  and compare on one clock;
* equal seconds: the fewest records behind wins;
* equal figures: the cluster name first in alphabetical order wins - deterministic, so every
  monitor and the CLI pick the same standby from the same figures.

No candidate left: ``chosen`` is None and :meth:`StandbyChoice.why_none` says why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class StandbyCandidate:
    """One standby of the source, as measured now.

    ``health``: how the monitors see it, in words (the quorum's state and votes);
    ``healthy``: whether that state is HEALTHY by a quorum.  ``rpo_records``/``rpo_seconds``:
    the failover plan's estimate (None: unknown).  ``excluded_because``: any other reason it
    cannot be promoted now (None: it can)."""

    target: str
    healthy: bool
    health: str
    rpo_records: int | None
    rpo_seconds: float | None
    excluded_because: str | None = None

    @property
    def exclusion(self) -> str | None:
        """Why this candidate is out of the running (None: it is in)."""
        if self.excluded_because is not None:
            return self.excluded_because
        if not self.healthy:
            return f"not healthy: {self.health}"
        return None

    @property
    def rpo_known(self) -> bool:
        return self.rpo_records is not None and self.rpo_seconds is not None

    def rank(self) -> tuple[bool, bool, float, bool, int, str]:
        """Sort key: a known RPO first, then younger evidence, then fewer records (unknowns
        last), then the name."""
        return (
            not self.rpo_known,
            self.rpo_seconds is None,
            self.rpo_seconds or 0.0,
            self.rpo_records is None,
            self.rpo_records or 0,
            self.target,
        )

    def figures(self) -> str:
        """The RPO estimate in words."""
        records = "unknown" if self.rpo_records is None else str(self.rpo_records)
        seconds = "unknown" if self.rpo_seconds is None else f"{self.rpo_seconds:.1f}s"
        return f"RPO {records} records, evidence age {seconds}"

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.target,
            "healthy": self.healthy,
            "health": self.health,
            "rpo_records": self.rpo_records,
            "rpo_s": self.rpo_seconds,
        }


class StandbyOutcome(StrEnum):
    CHOSEN = "chosen"
    LOST = "lost"  # eligible, but another ranked first
    EXCLUDED = "excluded"  # not eligible at all


@dataclass(frozen=True)
class StandbyVerdict:
    """One candidate's place in the choice and why."""

    candidate: StandbyCandidate
    outcome: StandbyOutcome
    why: str

    def to_json(self) -> dict[str, Any]:
        return {**self.candidate.to_json(), "outcome": self.outcome.value, "why": self.why}

    def line(self) -> str:
        c = self.candidate
        why = "not healthy" if self.why == f"not healthy: {c.health}" else self.why  # said once
        return f"{c.target}: {self.outcome.value} - {c.figures()}; {c.health}; {why}"


TIE_RULE = "equal figures: the cluster name first in alphabetical order"


@dataclass(frozen=True)
class StandbyChoice:
    """The standby chosen for ``source`` (if any) and every candidate's verdict: the chosen
    one first, then the ones that lost, best first, then the excluded ones by name."""

    source: str
    verdicts: tuple[StandbyVerdict, ...]

    @property
    def chosen(self) -> StandbyCandidate | None:
        first = self.verdicts[0] if self.verdicts else None
        return (
            first.candidate
            if first is not None and first.outcome is StandbyOutcome.CHOSEN
            else None
        )

    def verdict_of(self, target: str) -> StandbyVerdict:
        """``target``'s verdict; KeyError when it was no candidate."""
        for verdict in self.verdicts:
            if verdict.candidate.target == target:
                return verdict
        raise KeyError(target)

    def why_none(self) -> str:
        """Why no standby was chosen ("" when one was)."""
        if self.chosen is not None:
            return ""
        if not self.verdicts:
            return f"no flow replicates {self.source} to another cluster: no standby to promote"
        reasons = "; ".join(f"{v.candidate.target}: {v.why}" for v in self.verdicts)
        return f"no standby of {self.source} can be promoted ({reasons})"

    def summary(self) -> str:
        """One line: the chosen standby and why, or why none."""
        chosen = self.chosen
        if chosen is None:
            return self.why_none()
        others = [v for v in self.verdicts if v.outcome is not StandbyOutcome.CHOSEN]
        against = "; ".join(
            f"{v.candidate.target} {v.outcome.value} ({v.candidate.figures()}): {v.why}"
            for v in others
        )
        return f"standby {chosen.target} chosen for {self.source} ({chosen.figures()})" + (
            f" - {against}" if against else " - the only candidate"
        )

    def lines(self) -> list[str]:
        """Every candidate, one line each, chosen first."""
        return [verdict.line() for verdict in self.verdicts]

    def to_json(self) -> dict[str, Any]:
        chosen = self.chosen
        return {
            "source": self.source,
            "chosen": chosen.target if chosen is not None else None,
            "rule": "healthy by quorum and not blocked; a known RPO before an unknown one; the "
            "youngest evidence, then the fewest records behind; " + TIE_RULE,
            "candidates": [verdict.to_json() for verdict in self.verdicts],
            "why_none": self.why_none() or None,
        }


def choose(source: str, candidates: Iterable[StandbyCandidate]) -> StandbyChoice:
    """The standby for ``source`` among ``candidates`` by the module's rules.  Invariants: the
    chosen candidate is eligible and no eligible one ranks before it; the result does not
    depend on the candidates' order; targets are distinct (ValueError otherwise)."""
    given = list(candidates)
    if len({c.target for c in given}) != len(given):
        raise ValueError("one candidate per standby")
    excluded = sorted((c for c in given if c.exclusion is not None), key=lambda c: c.target)
    eligible = sorted((c for c in given if c.exclusion is None), key=StandbyCandidate.rank)
    verdicts: list[StandbyVerdict] = []
    if eligible:
        best, *rest = eligible
        verdicts.append(StandbyVerdict(best, StandbyOutcome.CHOSEN, _why_chosen(best, rest)))
        verdicts += [StandbyVerdict(c, StandbyOutcome.LOST, _why_lost(c, best)) for c in rest]
    verdicts += [StandbyVerdict(c, StandbyOutcome.EXCLUDED, c.exclusion or "") for c in excluded]
    return StandbyChoice(source, tuple(verdicts))


def _why_chosen(best: StandbyCandidate, rest: list[StandbyCandidate]) -> str:
    if not rest:
        return "the only eligible standby"
    if any(c.rank()[:-1] == best.rank()[:-1] for c in rest):
        return f"the smallest RPO, tied ({TIE_RULE})"
    return "the smallest RPO"


def _why_lost(loser: StandbyCandidate, best: StandbyCandidate) -> str:
    if not loser.rpo_known:
        return f"its RPO is unknown; {best.target}'s is known ({best.figures()})"
    if loser.rpo_seconds != best.rpo_seconds:
        return (
            f"older evidence: {loser.rpo_seconds or 0.0:.1f}s against {best.target}'s "
            f"{best.rpo_seconds or 0.0:.1f}s"
        )
    if loser.rpo_records != best.rpo_records:
        theirs = f"{best.target}'s {best.rpo_records}"
        return f"same evidence age, more records behind: {loser.rpo_records} against {theirs}"
    return f"same RPO as {best.target} ({TIE_RULE})"
