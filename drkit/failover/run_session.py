"""What the plan gave a run, in the process executing it: the run session.

An engine that plans and then runs the plan (``drkit failover``, automation, a drill) has work
the run can reuse: the readers of the flow's target topics the plan opened (the translation then
reads only what was appended since), the plan's translations by their inputs (a group whose
inputs did not change keeps its moves) and every planned group's state on the target.  The run's
translate step adds what it translated, which the commit step writes.  A step asks the session
for these - one way, whichever process runs it: a session given nothing (a resumed run, another
process) reads the same values back from the run's record in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from drkit.failover.plan import TranslationMemo
from drkit.failover.results import Translation
from drkit.failover.runs import RunRecord
from drkit.failover.snapshot import TargetReaders


@dataclass
class RunSession:
    """One run's session.  ``readers`` (None: the translation opens its own) and ``memo`` are
    the plan's, shared with the engine that made it; the planned states and the translation are
    this run's own."""

    readers: TargetReaders | None = None
    memo: TranslationMemo = field(default_factory=TranslationMemo)
    _planned_states: Mapping[str, str] | None = None
    _translated: Translation | None = None

    def for_run(self, planned_states: Mapping[str, str] | None = None) -> RunSession:
        """A session for one run: this one's readers and translations, ``planned_states`` as
        the plan just recorded them (None: read from the stored plan when asked)."""
        return RunSession(self.readers, self.memo, planned_states)

    def planned_states(self, run: RunRecord) -> Mapping[str, str]:
        """Per planned group, its state on the target when ``run`` was planned."""
        if self._planned_states is None:
            self._planned_states = run.planned_target_states()
        return self._planned_states

    def translated(self, translation: Translation) -> None:
        """The translate step's outcome, recorded by it in the run (the commit writes it)."""
        self._translated = translation

    @property
    def translated_here(self) -> bool:
        """Whether this session's run translated in this process (its values are at hand)."""
        return self._translated is not None

    def translation(self, stored: Callable[[], RunRecord]) -> Translation:
        """What the run's translate step recorded: as translated in this process, else read
        back from the run ``stored`` gives (the same values - a resumed run)."""
        if self._translated is None:
            return Translation.of(stored())
        return self._translated
