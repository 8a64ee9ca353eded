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
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from pydantic import SecretStr

from drkit.config.model import DrkitConfig
from drkit.errors import Problem
from drkit.failover.model import StepName

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


def hook_step_problems(config: DrkitConfig) -> list[Problem]:
    """The config loader's check (drkit.config_checks): a hook on a step no runbook has would
    never run - refused at load, with the steps there are."""
    steps = {step.value for step in StepName}
    return [
        Problem(f"failover.hooks[{index}].step",
                f"no runbook has a step {hook.step!r} (steps: {', '.join(sorted(steps))}, or *)")
        for index, hook in enumerate(config.failover.hooks)
        if hook.step != "*" and hook.step not in steps
    ]  # fmt: skip


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
    """Run one hook with ``context`` on stdin; never raises.

    A hook is its process, run in a process group of its own.  It has *finished* when that
    process exits (its exit code counts); whatever it left in its group then has
    :data:`_GRACE` seconds to close the output, after which drkit stops reading and kills the
    group.  A process still running at ``timeout_s`` has *timed out*: its whole group is killed
    and drkit reads what is left for at most :data:`_GRACE` seconds.  Either way a descendant
    that left the group (``setsid``, ``daemon(3)``, ``ssh -f``) and holds the output open
    keeps no one waiting past the timeout (security review 6, L1) - it is not killed: a daemon
    a hook starts should close its stdout and stderr."""
    document = json.dumps({"schema": HOOK_SCHEMA, **context}, default=str).encode()
    try:
        process = subprocess.Popen(
            list(hook.command), env=hook_environment(hook),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    except OSError as err:
        return HookOutcome(hook.command, hook.when, hook.step, None, False, str(err))
    try:
        raw, timed_out = _collect(process, document, time.monotonic() + hook.timeout_s)
    except BaseException:
        _kill_group(process)  # the engine is stopping (Ctrl-C): its hook goes with it
        raise
    kept = _scrubbed(raw.decode(errors="replace"), hook)[-_KEEP:]
    code = None if timed_out else process.returncode
    return HookOutcome(hook.command, hook.when, hook.step, code, timed_out, kept)


# How long drkit keeps reading a hook's output once its process has exited or been killed.
_GRACE = 1.0


def _collect(
    process: subprocess.Popen[bytes], document: bytes, deadline: float
) -> tuple[bytes, bool]:
    """The hook's output and whether it timed out (see :func:`run_hook`)."""
    assert process.stdin is not None and process.stdout is not None
    writer = threading.Thread(target=_feed, args=(process.stdin, document), daemon=True)
    writer.start()  # a hook that does not read its stdin must not block drkit
    chunks: list[bytes] = []
    timed_out = ended = eof = False
    until = deadline
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not eof:
            now = time.monotonic()
            if not ended and process.poll() is not None:
                ended, until = True, min(until, now + _GRACE)
            elif not ended and now >= deadline:
                _kill_group(process)
                process.wait()
                ended, timed_out, until = True, True, now + _GRACE
            left = until - now
            if left <= 0:
                break
            if selector.select(min(left, 0.1)):
                data = os.read(process.stdout.fileno(), 65536)
                chunks.append(data)
                eof = not data
    process.stdout.close()
    if not eof:
        _kill_group(process)  # what it left in its group holding the output
    elif not ended:  # it closed its output and runs on
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            timed_out = True
    process.wait()
    return b"".join(chunks), timed_out


def _feed(stdin: IO[bytes], document: bytes) -> None:
    with contextlib.suppress(OSError):  # it exited, or closed its stdin, without reading it all
        stdin.write(document)
    with contextlib.suppress(OSError):
        stdin.close()


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


def _kill_group(process: subprocess.Popen[bytes]) -> None:
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
