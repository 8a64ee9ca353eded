"""What a drill killed before its clean-up left on the clusters, and taking it away.

A drill grants ACLs to its role principals, its flows' standby guards go on its replicas and
its runs fence its topics; it removes all of them when it ends (drkit.drills.access.release).
Killed first (kill -9, a lost machine), it leaves them - and its topics and groups, which it
deletes last.  Its directory still holds what is needed to remove exactly those: its config
(the guards it placed follow from its flows), its manifest (the exact topic and group names it
may create, drkit.drills.footprint), its store (the fences its runs recorded) and the record
of its grants, written before the first ACL was created.

Nothing is taken on a directory's word: ``drkit drill cleanup`` acts only on a directory the
main state store recorded as a drill's and that holds that drill's manifest
(:func:`drill_directory`); it surveys first (:func:`survey`), shows what it found, asks, and
only then runs :func:`clean_up`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from drkit.config import load_config
from drkit.config_checks import CONFIG_CHECKS
from drkit.drills import access
from drkit.drills.environment import DrillEnvironment, drill_data, remove_drill_data
from drkit.drills.footprint import read_manifest
from drkit.drills.repo import DrillRepository
from drkit.errors import ConfigError, DrkitError, ExitCode, Problem
from drkit.kafka.ports import AdminFactory
from drkit.store import StateStore


class DrillStillRunning(DrkitError):
    """Its clean-up would pull the ACLs from under a drill that is still running."""

    exit_code = ExitCode.BLOCKED


@dataclass(frozen=True)
class Cleaned:
    drill: str
    grants_removed: int  # the recorded grants deleted (absent ones included)
    fences_lifted: tuple[str, ...]  # clusters whose fences of the drill's runs were lifted
    record_found: bool  # False: the drill released its grants itself, or never granted any
    removed: tuple[str, ...]  # cluster:name of the drill's topics and groups deleted
    left: tuple[str, ...]  # cluster:group still with members after the wait (run it again)

    def to_json(self) -> dict[str, object]:
        return {
            "drill": self.drill,
            "grants_removed": self.grants_removed,
            "fences_lifted": list(self.fences_lifted),
            "record_found": self.record_found,
            "removed": list(self.removed),
            "left": list(self.left),
        }


def drill_directory(state_dir: Path, drill: str, drills: DrillRepository) -> Path:
    """The directory of the drill ``drill`` names - its number in the main store
    (``drkit drill list``), its id (a directory of ``<state dir>/drills``) or its path - when
    the main store recorded that directory as a drill's and it holds that drill's manifest.
    Anything else - a directory that only holds a drkit.yaml, say - raises ConfigError naming
    the input, and nothing is touched."""
    if drill.isdigit():
        row = drills.get(int(drill))
        if row is None:
            raise _bad(drill, "no such drill in the state store (`drkit drill list` shows them)")
        if row.report_dir is None:
            raise _bad(drill, "the state store recorded no directory for it (nothing to clean up)")
        directory = Path(row.report_dir)
    else:
        root = state_dir / "drills"
        found = [c for c in (Path(drill), root / drill) if (c / "drkit.yaml").is_file()]
        if not found:
            raise _bad(drill, f"no drill directory with a drkit.yaml (looked in {root})")
        directory = found[0]
        if drills.of_directory(str(directory)) is None:
            raise _bad(drill, f"the state store recorded no drill in {directory}: not a drill's "
                              "directory, nothing was touched")  # fmt: skip
    try:
        read_manifest(directory)
    except ValueError as err:
        raise _bad(drill, f"{err}; nothing was touched") from None
    return directory


def _bad(drill: str, reason: str) -> ConfigError:
    return ConfigError([Problem("DRILL", f"{drill!r}: {reason}")])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Survey:
    """What a clean-up of one drill would remove, found before anything is touched."""

    drill: str
    grants: int  # recorded ACL grants (0 when none recorded)
    record_found: bool
    data: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # alias -> (topics, groups)

    @property
    def names(self) -> tuple[str, ...]:
        """``cluster:name`` of every topic and group that would be deleted."""
        return tuple(f"{alias}:{name}" for alias, (topics, groups) in self.data.items()
                     for name in (*topics, *groups))  # fmt: skip


def _leftovers(directory: Path) -> access.Leftovers | None:
    """The drill's record of its grants; DrillStillRunning while the process that wrote it
    lives (its own clean-up is still to come)."""
    try:
        leftovers = access.read_record(directory)
    except ValueError as err:
        raise _bad(str(directory), str(err)) from None
    pid = leftovers.pid if leftovers is not None else None
    if pid is not None and pid != os.getpid() and _alive(pid):
        raise DrillStillRunning(
            f"{directory.name}: the drill is still running (process {pid}); "
            "it removes its ACLs itself when it ends"
        )
    return leftovers


def survey(directory: Path, connect: AdminFactory) -> Survey:
    """What :func:`clean_up` would remove: the recorded grants and the drill's manifest names
    that exist on its clusters now.  Refused (:class:`DrillStillRunning`) while the process
    that recorded the grants lives."""
    leftovers = _leftovers(directory)
    try:
        data = drill_data(_environment(directory), connect)
    except ValueError as err:
        raise _bad(str(directory), str(err)) from None
    grants = leftovers.grants if leftovers is not None else {}
    return Survey(directory.name, sum(len(e) for e in grants.values()), leftovers is not None,
                  data)  # fmt: skip


def _environment(directory: Path) -> DrillEnvironment:
    config = load_config(directory / "drkit.yaml", checks=CONFIG_CHECKS)
    store = StateStore(f"sqlite:///{directory / 'drill.db'}")
    store.ensure_current()  # a drill killed while it started may not have created its tables
    return DrillEnvironment(directory.name, directory, directory / "drkit.yaml", config, store)


def clean_up(directory: Path, connect: AdminFactory) -> Cleaned:
    """Remove the recorded grants, the guards of the drill's flows and its runs' fences, then
    the drill's topics and groups - the names of its manifest only.

    Refused (:class:`DrillStillRunning`) while the process that recorded the grants lives.
    Idempotent: a clean-up cut short is finished by running it again."""
    leftovers = _leftovers(directory)  # the liveness check again, right before acting
    env = _environment(directory)
    grants = leftovers.grants if leftovers is not None else {}
    lifted = access.release(env.config, grants, env.store, directory, connect)
    try:
        data = remove_drill_data(env, connect)
    except ValueError as err:  # no valid manifest: nothing of its data is touched
        raise _bad(str(directory), str(err)) from None
    return Cleaned(
        directory.name,
        sum(len(entries) for entries in grants.values()),
        tuple(lifted),
        leftovers is not None,
        data.removed,
        data.left,
    )
