"""Hooks: operator commands run before and after failover steps.

Each hook gets the run's context as one JSON document on stdin (schema
``drkit.failover.hook/v1``: run, procedure, source, target, step, when, the target's bootstrap
servers - never credentials - and the active pointer) and has ``timeout_s`` to finish.  A
``before`` hook that exits non-zero, times out or cannot start *vetoes* its step; an ``after``
hook's failure is recorded and reported, and the run goes on.  Output is kept (the last 2,000
characters, the hook's ``env`` values masked) in the step's record.

Under the failover lease: the engine confirms its lease right before each hook starts, and an
``after`` hook is recorded *pending* with its step's outcome before it runs - an engine that
dies between the two leaves it pending, and the run's resume (by ``--resume`` or the monitor)
runs it again before going on.  The context carries the pointer's epoch, so a hook that
publishes the pointer can refuse an epoch older than the one it last published.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import SecretStr

HOOK_SCHEMA = "drkit.failover.hook/v1"
_KEEP = 2000
# What every hook inherits from drkit's environment: enough to find and run a program.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")


class Hook(Protocol):
    when: Literal["before", "after"]
    step: str
    command: tuple[str, ...]
    timeout_s: float
    env: dict[str, SecretStr]  # set for the hook's process only (its secrets)
    pass_env: tuple[str, ...]  # drkit's own variables it also gets


@dataclass(frozen=True)
class HookOutcome:
    command: tuple[str, ...]
    when: str
    step: str
    exit_code: int | None
    timed_out: bool
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        what = " ".join(self.command)
        if self.timed_out:
            return f"hook '{what}' timed out"
        if self.exit_code is None:
            return f"hook '{what}' could not start: {self.output}"
        tail = self.output.strip().splitlines()[-1:] or [""]
        return f"hook '{what}' exited {self.exit_code}: {tail[0]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "command": list(self.command),
            "when": self.when,
            "step": self.step,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "output": self.output,
        }


def hooks_for(hooks: Iterable[Hook], when: str, step: str) -> list[Hook]:
    """The hooks that run ``when`` (before/after) ``step``, in configuration order."""
    return [h for h in hooks if h.when == when and h.step in ("*", step)]


def hook_environment(hook: Hook) -> dict[str, str]:
    """What a hook's process gets: :data:`BASE_ENV` and the names in its ``pass_env`` from
    drkit's own environment, then its ``env`` (its secrets) - never the rest of drkit's."""
    names = (*BASE_ENV, *hook.pass_env)
    inherited = {name: os.environ[name] for name in names if name in os.environ}
    return {**inherited, **{k: v.get_secret_value() for k, v in hook.env.items()}}


def hook_start_problem(hook: Hook) -> str | None:
    """Why ``hook`` could not start on this machine - its program is not found on the PATH it
    gets, does not exist or is not executable - or None.  ``drkit config validate`` warns of
    it: a ``before`` hook that cannot start vetoes its step at failover time."""
    program = hook.command[0]
    if os.sep not in program:
        search = os.pathsep.join(os.get_exec_path(hook_environment(hook)))
        return None if shutil.which(program, path=search) else f"{program!r} is not found on PATH"
    if not Path(program).is_file():
        return f"{program!r} does not exist (or is not a file)"
    if not os.access(program, os.X_OK):
        return f"{program!r} is not executable"
    return None


def run_hook(hook: Hook, context: dict[str, Any]) -> HookOutcome:
    """Run one hook with ``context`` on stdin; never raises.  The hook runs in a process
    group of its own: at its timeout the whole group is killed - a shell's children too,
    which would otherwise hold its output open and keep the engine waiting past the timeout."""
    document = json.dumps({"schema": HOOK_SCHEMA, **context}, default=str)
    try:
        process = subprocess.Popen(
            list(hook.command), env=hook_environment(hook), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    except OSError as err:
        return HookOutcome(hook.command, hook.when, hook.step, None, False, str(err))
    try:
        output, _ = process.communicate(document, timeout=hook.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        kept = _scrubbed(output or "", hook)[-_KEEP:]
        return HookOutcome(hook.command, hook.when, hook.step, None, True, kept)
    except BaseException:
        _kill_group(process)  # the engine is stopping (Ctrl-C): its hook goes with it
        raise
    kept = _scrubbed(output or "", hook)[-_KEEP:]
    return HookOutcome(hook.command, hook.when, hook.step, process.returncode, False, kept)


_MASK = "**********"
# Shorter env values are not masked in the output: a LEVEL=1 would turn every 1 into the mask.
_MIN_MASKED = 4


def _scrubbed(output: str, hook: Hook) -> str:
    """``output`` with the hook's ``env`` values masked - it is kept in the run's record and
    shown (a hook that prints its token: ``curl -v``, ``set -x``).  Masked before it is cut to
    its last characters, so no part of a value is left at the cut."""
    values = {value.get_secret_value() for value in hook.env.values()}
    for value in sorted(values, key=len, reverse=True):  # a value inside another: longest first
        if len(value) >= _MIN_MASKED:
            output = output.replace(value, _MASK)
    return output


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.kill()


HookExecutor = Callable[[Hook, dict[str, Any]], HookOutcome]


def run_hooks(
    hooks: Sequence[Hook],
    when: str,
    step: str,
    context: dict[str, Any],
    execute: HookExecutor = run_hook,
    before_each: Callable[[], object] = lambda: None,
) -> list[HookOutcome]:
    """Run every matching hook in order; a failed ``before`` hook stops the ones after it.
    ``before_each`` runs right before each hook starts (the engine confirms its lease there: a
    process frozen past it runs no hook against a world that moved on)."""
    outcomes: list[HookOutcome] = []
    for hook in hooks_for(hooks, when, step):
        before_each()
        outcome = execute(hook, {**context, "step": step, "when": when})
        outcomes.append(outcome)
        if when == "before" and not outcome.ok:
            break
    return outcomes
