"""Failpoints: named places where drkit can be made to fail on purpose, from outside the
process - the technique of etcd's gofail and TiKV's fail-rs, used by the fault suite to put a
step exactly half-way (e.g. a fence whose ACLs exist on the cluster but whose engine never
recorded them applied).

Armed through the environment, never through the configuration file::

    DRKIT_FAILPOINTS="reconcile.after_acls=error;other.place=kill"

Actions:

* ``error`` - raise :class:`~drkit.errors.FailpointError` there: the operation fails the way a
  cluster timeout would, and drkit's own error handling (step failure, rollback) takes over;
* ``kill``  - SIGKILL this process there: a crash with no cleanup and no last write;
* ``stop``  - SIGSTOP this process there (it goes on where it stood once sent SIGCONT): a
  freeze at an exact point - a paused VM, a stalled host.
* ``hang``  - block the calling thread there for good, the rest of the process going on: a
  client call that never returns (a close waiting for a coordinator that never answers).

Unarmed (the default), :func:`reach` is one environment lookup and does nothing.  An armed
failpoint is logged as a warning when it fires, so a report can never hide that it was staged.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from drkit.errors import ConfigError, FailpointError, Problem

ENVIRONMENT = "DRKIT_FAILPOINTS"
ACTIONS = ("error", "kill", "stop", "hang")

# Every failpoint drkit has; arming an unknown name is a configuration error (a typo would
# otherwise stage nothing and the fault case would pass for the wrong reason).
KNOWN = frozenset(
    {
        "reconcile.after_acls",  # a pass changed ACLs (a fence's DENYs exist), rows not yet APPLIED
        "move_pointer.after_move",  # the pointer is on the target, the step not yet done
        "commit_group_offsets.before_write",  # translated, nothing committed on the target yet
        "commit_group_offsets.after_confirm",  # the lease confirmed, the commits not yet sent
        "automation.before_start",  # a monitor decided to fail over, the run not yet started
        "follow_on.before_syncs",  # a follow-on batch's copies written, their offset syncs not
        "source_consumer.close",  # a replication worker's source consumer closing (hang)
    }
)

log = logging.getLogger(__name__)


def armed(spec: str | None = None) -> dict[str, str]:
    """The failpoints ``spec`` (default: ``$DRKIT_FAILPOINTS``) arms, name -> action."""
    text = os.environ.get(ENVIRONMENT, "") if spec is None else spec
    found: dict[str, str] = {}
    problems: list[Problem] = []
    for entry in filter(None, (part.strip() for part in text.split(";"))):
        name, _, action = (piece.strip() for piece in entry.partition("="))
        if name not in KNOWN:
            problems.append(Problem(ENVIRONMENT, f"unknown failpoint {name!r}"))
        elif action not in ACTIONS:
            problems.append(
                Problem(ENVIRONMENT, f"{name}: action must be one of {', '.join(ACTIONS)}")
            )
        else:
            found[name] = action
    if problems:
        raise ConfigError(problems)
    return found


_fired: set[str] = set()


def reset() -> None:
    """Arm every failpoint again in this process (tests run several cases in one)."""
    _fired.clear()


def reach(name: str) -> None:
    """Pass the failpoint ``name``: fire it if it is armed and has not fired in this process
    yet, else do nothing.  Once, as a real fault is: the rollback or retry after it passes the
    same place again (a reconcile pass that undoes the fenced ACLs changes ACLs too)."""
    assert name in KNOWN, name
    action = armed().get(name)
    if action is None or name in _fired:
        return
    _fired.add(name)
    log.warning("failpoint fired", extra={"failpoint": name, "action": action})
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if action == "hang":
        threading.Event().wait()
    raise FailpointError(f"failpoint {name} fired ({ENVIRONMENT})")
