"""Per-record transforms of a flow, applied between consume and produce.

Built-ins (``type`` in config, ``options`` below):

* ``filter``: drop (``action: drop``, default) or keep only (``action: keep``) records whose
  key matches ``key_regex`` and/or whose header ``header`` matches ``header_regex``.
* ``drop_json_fields``: remove ``fields`` (dotted paths) from JSON object values.
* ``mask_json_fields``: replace ``fields`` in JSON object values with ``mask`` (default "****").
* ``route``: rename the target topic: ``pattern`` (regex on the policy's target name) →
  ``replacement``; applied per topic, so partitions keep their exact offset mapping.

Plugins: a callable registered under the ``drkit.transforms`` entry point, called with the
options mapping, returning a :data:`Transform`.

Contract: a transform returns the (possibly new) record or None to drop it; it must not change
the record's partition.  Dropped records count as done for progress (they are deliberately not
replicated) and are counted in ``drkit_replication_filtered_total``.  A transform that raises
stops the flow at that record with a ReplicationError naming topic, partition and offset;
progress stays before it, so nothing after it is skipped (fix the plugin, restart).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import EntryPoint, entry_points

from drkit.config.model import TransformConfig
from drkit.errors import ConfigError, Problem


@dataclass(frozen=True)
class OutRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


Transform = Callable[[OutRecord], OutRecord | None]


def _filter(options: Mapping[str, object]) -> Transform:
    key_regex = options.get("key_regex")
    header = options.get("header")
    header_regex = options.get("header_regex")
    action = options.get("action", "drop")
    if action not in ("drop", "keep"):
        raise ValueError("action must be 'drop' or 'keep'")
    if key_regex is None and header is None:
        raise ValueError("give key_regex and/or header (+ header_regex)")
    key_pattern = re.compile(str(key_regex).encode()) if key_regex is not None else None
    header_pattern = re.compile(str(header_regex or ".*").encode())

    def matches(record: OutRecord) -> bool:
        if key_pattern is not None and not key_pattern.search(record.key or b""):
            return False
        if header is not None:
            values = [v or b"" for k, v in record.headers if k == header]
            if not any(header_pattern.search(v) for v in values):
                return False
        return True

    drop = action == "drop"
    return lambda record: None if matches(record) == drop else record


def _json_paths(options: Mapping[str, object]) -> list[list[str]]:
    fields = options.get("fields")
    if not isinstance(fields, list) or not fields:
        raise ValueError("fields must be a non-empty list of dotted paths")
    return [str(f).split(".") for f in fields]


def _edit_json(record: OutRecord, edit: Callable[[dict[str, object]], bool]) -> OutRecord:
    if not record.value:
        return record
    try:
        document = json.loads(record.value)
    except (ValueError, UnicodeDecodeError):
        return record  # not JSON: passed through unchanged, never dropped
    if not isinstance(document, dict) or not edit(document):
        return record
    return replace(record, value=json.dumps(document, separators=(",", ":")).encode())


def _walk(document: dict[str, object], path: list[str]) -> dict[str, object] | None:
    node: object = document
    for part in path[:-1]:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node if isinstance(node, dict) else None


def _drop_fields(options: Mapping[str, object]) -> Transform:
    paths = _json_paths(options)

    def edit(document: dict[str, object]) -> bool:
        changed = False
        for path in paths:
            parent = _walk(document, path)
            if parent is not None and path[-1] in parent:
                del parent[path[-1]]
                changed = True
        return changed

    return lambda record: _edit_json(record, edit)


def _mask_fields(options: Mapping[str, object]) -> Transform:
    paths = _json_paths(options)
    mask = options.get("mask", "****")

    def edit(document: dict[str, object]) -> bool:
        changed = False
        for path in paths:
            parent = _walk(document, path)
            if parent is not None and path[-1] in parent:
                parent[path[-1]] = mask
                changed = True
        return changed

    return lambda record: _edit_json(record, edit)


_BUILTINS: dict[str, Callable[[Mapping[str, object]], Transform]] = {
    "filter": _filter,
    "drop_json_fields": _drop_fields,
    "mask_json_fields": _mask_fields,
}


# Every built-in type; none but ``filter`` drops records (plugins may).
BUILTIN_TYPES = frozenset({*_BUILTINS, "route"})


@dataclass(frozen=True)
class TransformChain:
    """The record transforms of a flow plus its topic renames."""

    steps: tuple[Transform, ...]
    renames: tuple[tuple[re.Pattern[str], str], ...]

    def apply(self, record: OutRecord) -> OutRecord | None:
        for step in self.steps:
            result = step(record)
            if result is None:
                return None
            record = result
        return record

    def rename(self, target_topic: str) -> str:
        for pattern, replacement in self.renames:
            target_topic = pattern.sub(replacement, target_topic)
        return target_topic


def _route(options: Mapping[str, object], where: str) -> tuple[re.Pattern[str], str] | Problem:
    """The (pattern, replacement) of a ``route`` step, or the problem with its options.

    The replacement is checked against the pattern here, at load: a group reference the
    pattern lacks (``\\3`` with two groups, an unknown ``\\g<name>``) would otherwise fail on
    every rename and stop the flow at run time.
    """
    pattern, replacement = options.get("pattern"), options.get("replacement")
    if not isinstance(pattern, str) or not isinstance(replacement, str):
        return Problem(where, "route needs string options pattern and replacement")
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        return Problem(f"{where}.options.pattern", f"invalid regex {pattern!r}: {err}")
    try:
        # re compiles the replacement template before it searches, so an empty subject
        # checks every group reference without needing a matching topic name.
        compiled.sub(replacement, "")
    except (re.error, IndexError) as err:
        return Problem(
            f"{where}.options.replacement",
            f"{replacement!r} does not fit pattern {pattern!r} ({compiled.groups} group(s)): {err}",
        )
    return compiled, replacement


def _plugins_for(configs: Sequence[TransformConfig]) -> dict[str, EntryPoint]:
    """The installed transform plugins - looked up only when a config names a type that is not
    built in: scanning every installed distribution's metadata costs milliseconds, and flows'
    topologies are built often."""
    if all(c.type == "route" or c.type in _BUILTINS for c in configs):
        return {}
    return {entry.name: entry for entry in entry_points(group="drkit.transforms")}


def build_chain(configs: Sequence[TransformConfig], path: str = "transforms") -> TransformChain:
    """Build the chain; raises ConfigError naming the transform and the reason."""
    steps: list[Transform] = []
    renames: list[tuple[re.Pattern[str], str]] = []
    problems: list[Problem] = []
    plugins = _plugins_for(configs)
    for index, config in enumerate(configs):
        where = f"{path}[{index}]"
        try:
            if config.type == "route":
                route = _route(config.options, where)
                if isinstance(route, Problem):
                    problems.append(route)
                else:
                    renames.append(route)
            elif config.type in _BUILTINS:
                steps.append(_BUILTINS[config.type](config.options))
            elif config.type in plugins:
                steps.append(plugins[config.type].load()(config.options))
            else:
                raise ValueError(f"unknown transform type {config.type!r}")
        except (ValueError, re.error) as err:
            problems.append(Problem(where, str(err)))
    if problems:
        raise ConfigError(problems)
    return TransformChain(tuple(steps), tuple(renames))
