"""What a drill killed before its clean-up left on the clusters, and taking it away.

A drill grants ACLs to its role principals, its flows' standby guards go on its replicas and
its runs fence its topics; it removes all of them when it ends (drkit.drills.access.release).
Killed first (kill -9, a lost machine), it leaves them - and its topics and groups, which it
deletes last.  Its directory still holds what is needed to remove exactly those: its config
(the guards it placed follow from its flows, its topics and groups carry its prefix), its store
(the fences its runs recorded) and the record of its grants, written before the first ACL was
created.  ``drkit drill cleanup`` runs :func:`clean_up` on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from drkit.config import load_config
from drkit.drills import access
from drkit.drills.environment import DrillEnvironment, remove_drill_data
from drkit.errors import ConfigError, DrkitError, ExitCode, Problem
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


def drill_directory(state_dir: Path, drill: str) -> Path:
    """A drill's directory from its id (``<state dir>/drills/<id>``) or its path; raises
    ConfigError naming the input when it is neither."""
    root = state_dir / "drills"
    for candidate in (Path(drill), root / drill):
        if (candidate / "drkit.yaml").is_file():
            return candidate
    raise _bad(drill, f"no drill directory with a drkit.yaml (looked in {root})")


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


def clean_up(directory: Path) -> Cleaned:
    """Remove the recorded grants, the guards of the drill's flows and its runs' fences, then
    the drill's topics and groups.

    Refused (:class:`DrillStillRunning`) while the process that recorded the grants lives.
    Idempotent: a clean-up cut short is finished by running it again."""
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
    config = load_config(directory / "drkit.yaml")
    store = StateStore(f"sqlite:///{directory / 'drill.db'}")
    store.ensure_current()  # a drill killed while it started may not have created its tables
    grants = leftovers.grants if leftovers is not None else {}
    lifted = access.release(config, grants, store, directory)
    env = DrillEnvironment(directory.name, directory, directory / "drkit.yaml", config, store)
    data = remove_drill_data(env)
    return Cleaned(
        directory.name,
        sum(len(entries) for entries in grants.values()),
        tuple(lifted),
        leftovers is not None,
        data.removed,
        data.left,
    )
