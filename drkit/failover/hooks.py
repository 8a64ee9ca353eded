"""Hooks: operator commands run before and after failover steps.

Each hook gets the run's context as one JSON document on stdin (schema
``drkit.failover.hook/v1``: run, procedure, source, target, step, when, the target's bootstrap
servers - never credentials - and the active pointer) and has ``timeout_s`` to finish.  A
``before`` hook that exits non-zero, times out or cannot start *vetoes* its step; an ``after``
hook's failure is recorded and reported, and the run goes on.  Output is kept (the last 2,000
characters) in the step's record.

Under the failover lease: the engine confirms its lease right before each hook starts, and an
``after`` hook is recorded *pending* with its step's outcome before it runs - an engine that
dies between the two leaves it pending, and the run's resume (by ``--resume`` or the monitor)
runs it again before going on.  The context carries the pointer's epoch, so a hook that
publishes the pointer can refuse an epoch older than the one it last published.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import SecretStr

HOOK_SCHEMA = "drkit.failover.hook/v1"
_KEEP = 2000


class Hook(Protocol):
    when: Literal["before", "after"]
    step: str
    command: tuple[str, ...]
    timeout_s: float
    env: dict[str, SecretStr]  # set for the hook's process only (its secrets)


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


def run_hook(hook: Hook, context: dict[str, Any]) -> HookOutcome:
    """Run one hook with ``context`` on stdin; never raises."""
    document = json.dumps({"schema": HOOK_SCHEMA, **context}, default=str)
    try:
        done = subprocess.run(
            list(hook.command),
            env={**os.environ, **{k: v.get_secret_value() for k, v in hook.env.items()}},
            input=document,
            capture_output=True,
            text=True,
            timeout=hook.timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        output = _text(expired.stdout) + _text(expired.stderr)
        return HookOutcome(hook.command, hook.when, hook.step, None, True, output[-_KEEP:])
    except OSError as err:
        return HookOutcome(hook.command, hook.when, hook.step, None, False, str(err))
    output = (done.stdout or "") + (done.stderr or "")
    return HookOutcome(hook.command, hook.when, hook.step, done.returncode, False, output[-_KEEP:])


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


def _text(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
