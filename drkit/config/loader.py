"""Load a :class:`DrkitConfig` from YAML, resolving ``${ENV_VAR}`` references.

Contract: :func:`load_config` either returns a fully valid config or raises
:class:`drkit.errors.ConfigError` carrying one :class:`Problem` per defect, each naming the key
path (``flows[0].source``) and the reason.  It never raises anything else for bad input, and no
problem message contains a resolved secret.

"Fully valid" is the model's own rules plus the ``checks`` the caller hands in: the parts built
from a config by higher layers - a flow's replication policy and transforms (plugins among
them, drkit.topology.checks), the step a hook names (drkit.failover.hooks) - are checked by
those layers' functions, so this package imports none of them.  The edges (the CLI, the drill
processes) pass :data:`drkit.config_checks.CONFIG_CHECKS`; a caller passing none gets the
model's rules only (tests/unit/test_config_checks.py lists the two that may, and why).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from drkit.config.model import (
    MAX_MS_SETTING_S,
    DrkitConfig,
    FlowConfig,
    TransformConfig,
    flow_reference_problems,
)
from drkit.errors import ConfigError, Problem

ConfigCheck = Callable[[DrkitConfig], list[Problem]]
"""A higher layer's check of a config the model accepted: one Problem per defect, by key path."""

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(
    path: str | Path,
    env: Mapping[str, str] | None = None,
    *,
    checks: Sequence[ConfigCheck] = (),
) -> DrkitConfig:
    """Read, interpolate and validate the YAML file at ``path`` (the model's rules, then
    ``checks`` in order)."""
    return load_config_text(read_text_file(path), source=str(path), env=env, checks=checks)


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of a file an operator named; any reason it cannot be read (missing, a
    directory, no permission, not UTF-8) is a :class:`ConfigError` naming the file."""
    file = Path(path)
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if str(path) == "-":  # the shell's stdin convention: not drkit's
            why = "drkit reads no config from stdin ('-'): give the file's path"
            raise ConfigError([Problem("", why)], source=str(file)) from None
        raise ConfigError([Problem("", "file not found")], source=str(file)) from None
    except IsADirectoryError:
        raise ConfigError([Problem("", "is a directory, not a file")], source=str(file)) from None
    except OSError as err:
        raise ConfigError([Problem("", f"cannot read: {err.strerror}")], source=str(file)) from None
    except UnicodeDecodeError as err:
        line = file.read_bytes()[: err.start].count(b"\n") + 1
        reason = f"not UTF-8 text: byte 0x{err.object[err.start]:02x} on line {line}"
        raise ConfigError([Problem("", reason + " (save it as UTF-8)")], source=str(file)) from None


# How deep a config's lists and mappings may nest: a real one nests under ten levels; PyYAML
# composes each level by recursion, so 200,000 "[" ended in a RecursionError (a traceback).
MAX_DEPTH = 100
NESTED_TOO_DEEPLY = f"nested too deeply (more than {MAX_DEPTH} levels of lists and mappings)"


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last
    silently: a cluster alias defined twice dropped the first definition unseen) and nesting
    deeper than :data:`MAX_DEPTH` (before Python's recursion limit is reached)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, NESTED_TOO_DEEPLY, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges a mapping in (its keys may be overridden here)
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def yaml_problem(err: yaml.YAMLError) -> Problem:
    """A YAML syntax error as one problem: where (line and column, from 1) and what, with what
    the parser was reading when it failed and where that began - PyYAML's own message spans
    five lines, quoting the text with a caret under it."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    reason = getattr(err, "problem", None) or "not valid YAML"
    context = getattr(err, "context", None)
    if context:
        began = getattr(err, "context_mark", None)
        at = f" at line {began.line + 1}, column {began.column + 1}" if began is not None else ""
        reason = f"{reason} ({context}{at})"
    return Problem(where, f"invalid YAML: {reason}")


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed by YAML's safe loader - a key given twice and nesting deeper than
    :data:`MAX_DEPTH` refused - or a ConfigError naming ``source``, the line and column and
    the problem in one line: drkit's config and a drill's scenario alike."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except RecursionError:  # the depth limit above keeps it away; never a traceback
        raise ConfigError(
            [Problem("", f"invalid YAML: {NESTED_TOO_DEEPLY}")], source=source
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError([yaml_problem(err)], source=source) from None


def load_config_text(
    text: str,
    source: str = "<config>",
    env: Mapping[str, str] | None = None,
    *,
    checks: Sequence[ConfigCheck] = (),
) -> DrkitConfig:
    """Parse, interpolate and validate YAML text (see module docstring for the contract)."""
    raw = parse_yaml(text, source)
    if not isinstance(raw, dict):
        raise ConfigError([Problem("", "the top level must be a mapping")], source=source)
    if _expands_beyond(raw, MAX_VALUES):
        why = (f"expands to more than {MAX_VALUES:,} values: YAML aliases nested into each "
               "other (a 'billion laughs')?")  # fmt: skip
        raise ConfigError([Problem("", why)], source=source)
    if _deeper_than(raw, MAX_DEPTH):  # aliases nest one anchored value into another
        raise ConfigError([Problem("", NESTED_TOO_DEEPLY + " once aliases are expanded")],
                          source=source)  # fmt: skip
    missing: list[Problem] = _hook_command_references(raw)
    resolved = _interpolate(raw, "", os.environ if env is None else env, missing)
    try:
        config = DrkitConfig.model_validate(resolved)
    except ValidationError as err:
        problems = _problems_from(err)
        no_clusters = any(p.path == "clusters" for p in problems)  # "unknown cluster" follows
        flows_named = any(p.path.startswith("flows[") and "cluster" in p.reason for p in problems)
        if not (no_clusters or flows_named):
            problems.extend(_raw_reference_problems(resolved))
        problems = list(dict.fromkeys(problems))  # one line per defect, however found
        # A missing variable was replaced by "" - don't also report what "" broke there (at
        # its key, or by its section's own rule: "password empty").
        unset = {p.path for p in missing}
        broken = [p for p in problems
                  if not any(u == p.path or u.startswith(f"{p.path}.") for u in unset)]  # fmt: skip
        raise ConfigError(missing + broken, source=source) from None
    problems = missing + [problem for check in checks for problem in check(config)]
    if problems:
        raise ConfigError(problems, source=source)
    return config


GROUP_REFERENCE = re.compile(r"\\(?:\d|g<[^>]*>)")  # \1, \g<name> in a replacement


def route_merges(transform: TransformConfig) -> bool:
    """Whether a route step sends every topic its pattern matches onto one literal name: a
    replacement without group references, and a pattern matching more than one name."""
    pattern, replacement = transform.options.get("pattern"), transform.options.get("replacement")
    if not isinstance(pattern, str) or not isinstance(replacement, str):
        return False
    if GROUP_REFERENCE.search(replacement):
        return False
    return not _plain(pattern.removeprefix("^").removesuffix("$"))


def _plain(literal: str) -> bool:
    """Whether a regex (anchors removed) matches exactly one text: no metacharacter unescaped."""
    return re.fullmatch(r"(?:[A-Za-z0-9_\-]|\\[.\-_])*", literal) is not None


# No real config comes near this; an alias bomb (anchors referring to anchors, a few lines of
# YAML) expands to billions of values, and walking them hung every command that read it.
MAX_VALUES = 100_000


def _expands_beyond(root: Any, limit: int) -> bool:
    """Whether ``root``, with every alias expanded, holds more than ``limit`` values (stops
    counting at the limit: linear in ``limit``, whatever the expansion)."""
    pending, seen = [root], 0
    while pending:
        node = pending.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _deeper_than(root: Any, limit: int) -> bool:
    """Whether ``root``, with every alias expanded, nests lists and mappings more than ``limit``
    levels deep (without recursion; called once ``root`` is known to hold few values)."""
    pending: list[tuple[Any, int]] = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        if children and depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def _interpolate(node: Any, path: str, env: Mapping[str, str], problems: list[Problem]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string; record missing variables."""
    if isinstance(node, dict):
        return {
            key: _interpolate(value, _join(path, str(key)), env, problems)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [
            _interpolate(value, f"{path}[{index}]", env, problems)
            for index, value in enumerate(node)
        ]
    if isinstance(node, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            problems.append(Problem(path, f"environment variable {name} is not set"))
            return ""

        return _ENV_REF.sub(substitute, node)
    return node


def _hook_command_references(raw: dict[str, Any]) -> list[Problem]:
    """A ``${VAR}`` in a hook's command, refused before it is expanded: the expanded value
    would sit in the process list while the hook runs, in the run's record and in logs. A
    hook's secrets go in its ``env`` (set for its process only, masked when shown)."""
    failover = raw.get("failover")
    hooks = failover.get("hooks") if isinstance(failover, dict) else None
    problems = []
    for index, hook in enumerate(hooks if isinstance(hooks, list) else ()):
        command = hook.get("command") if isinstance(hook, dict) else None
        for place, part in enumerate(command if isinstance(command, list) else ()):
            if isinstance(part, str) and _ENV_REF.search(part):
                problems.append(Problem(
                    f"failover.hooks[{index}].command[{place}]",
                    "a ${VAR} here would show its value in the process list, the run's record "
                    "and logs: pass it in the hook's environment instead "
                    "(env: {NAME: ${VAR}}, read as $NAME by the command)",
                ))  # fmt: skip
    return problems


def _raw_reference_problems(raw: dict[str, Any]) -> list[Problem]:
    """Flow/cluster cross-references checked on the raw mapping (when validation failed)."""
    clusters = raw.get("clusters")
    flows = raw.get("flows")
    if not isinstance(clusters, dict) or not isinstance(flows, list):
        return []
    pairs = [
        (flow.get("source"), flow.get("target")) if isinstance(flow, dict) else (None, None)
        for flow in flows
    ]
    return [Problem(p, r) for p, r in flow_reference_problems(set(clusters), pairs)]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def validation_problems(err: ValidationError) -> list[Problem]:
    """Problems (key path relative to the validated model, reason) of a pydantic error."""
    return _problems_from(err)


def _problems_from(err: ValidationError) -> list[Problem]:
    problems: list[Problem] = []
    # The input is looked at (NaN), never shown: it can be a secret.
    details = err.errors(include_url=False)
    failed_items = {  # the lists and tuples an item of which failed
        tuple(d["loc"][:i]) for d in details for i, part in enumerate(d["loc"])
        if isinstance(part, int)
    }  # fmt: skip
    for detail in details:
        if detail["type"] == "too_short" and tuple(detail["loc"]) in failed_items:
            continue  # pydantic counts only the valid items: "at least 1 item, not 0" is noise
        if detail["type"] == "references":
            # Paths inside are relative to the model that raised it (``loc``).
            where = _loc_path(detail["loc"])
            problems.extend(Problem(_join(where, p), r) for p, r in detail["ctx"]["problems"])
            continue
        problems.append(Problem(_loc_path(detail["loc"]), _reason(detail)))
    return problems


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith(("function-", "tagged-union")):
            continue  # pydantic's internal validator names carry no meaning for the operator
        else:
            path = _join(path, part)
    return path


# Pydantic's words for a value of the wrong shape name Python types ("a valid tuple") and
# regexes; the operator wrote YAML.  One mapping from its error types (and patterns) to words.
_PATTERN_WORDS = {
    r"^https?://\S+$": "must be an http(s):// URL, e.g. https://host:8080/path",
    r"^[A-Za-z0-9._-]+$": "may hold only letters, digits, '.', '_' or '-'",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "must be an environment variable name (letters, digits, _)",
    r"^[a-z0-9-]+$": "may hold only lowercase letters, digits and '-'",
}
# Examples of a list, by the key that holds it.
_LIST_EXAMPLES = {
    "command": "[prog, arg]",
    "pass_env": "[KUBECONFIG, AWS_PROFILE]",
    "super_users": "['User:admin']",
    "flows": "[{source: dc1, target: dc2}]",
    "hooks": "[{when: before, command: [prog, arg]}]",
    "include": "['orders.*', payments]",
    "exclude": "['orders.*', payments]",
    "events": "[failover_started, failover_finished]",
}
# Examples of a mapping, by the key that holds it.
_MAPPING_EXAMPLES = {
    "schema_registry": "url: http://host:8080/apis/ccompat/v7",
    "security": "protocol: SASL_SSL",
    "oauth": "token_endpoint_url: https://idp/token",
    "clusters": "dc1: {bootstrap_servers: 'host:9092'}",
}


def _number(value: Any) -> str:
    """A bound as written in YAML: 3600, not 3600.0; 2147483.647 in full."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _reason(detail: Any) -> str:
    kind = detail["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    ctx = detail.get("ctx") or {}
    keys = [part for part in detail["loc"] if isinstance(part, str)]
    key = keys[-1] if keys else ""
    value = detail.get("input")
    if isinstance(value, float) and not math.isfinite(value) and kind != "finite_number":
        return "must be a finite number"  # NaN fails every bound: "at most 3600" misled
    if kind in ("tuple_type", "list_type", "set_type"):
        return f"must be a list, e.g. {_LIST_EXAMPLES.get(key, '[item, item]')}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        example = _MAPPING_EXAMPLES.get(key)
        return f"must be a mapping with {example}" if example else "must be a mapping (key: value)"
    if kind == "string_type" and key == "bootstrap_servers":
        return "must be one comma-separated string 'host:port,host:port'"
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERN_WORDS:
        return str(_PATTERN_WORDS[ctx["pattern"]])
    if kind == "too_short" and key == "clusters" and len(keys) == 1:
        return "at least one cluster is needed"
    if kind == "too_short":
        count = ctx.get("min_length", 1)
        return f"must hold at least {count} item{'' if count == 1 else 's'}"
    if kind == "greater_than":
        return f"must be above {_number(ctx['gt'])}"
    if kind == "less_than":
        return f"must be below {_number(ctx['lt'])}"
    if kind == "less_than_equal":
        why = ""
        if ctx["le"] == MAX_MS_SETTING_S:
            why = " (seconds: drkit gives it to librdkafka in milliseconds, a 32-bit count)"
        elif key == "topic_refresh_interval_s":
            why = " (seconds: librdkafka's topic.metadata.refresh.interval.ms is at most an hour)"
        return f"at most {_number(ctx['le'])}{why}"
    if kind == "greater_than_equal":
        return f"at least {_number(ctx['ge'])}"
    message = str(detail["msg"])
    return message.removeprefix("Value error, ")


def canonical_flow(name: str) -> str:
    """A flow as typed on a command line -> its name: ``dc1->dc2`` as is, ``dc1:dc2`` (no shell
    quoting needed: ``->`` unquoted is a redirection) the same flow."""
    text = name.strip()
    source, arrow, target = text.partition("->")
    if not arrow:
        source, colon, target = text.partition(":")
        if not colon:
            return text
    return f"{source.strip()}->{target.strip()}"


def known_flow(config: DrkitConfig, name: str, option: str) -> FlowConfig:
    """The flow ``name`` (``dc1->dc2`` or ``dc1:dc2``); ConfigError naming ``option``, the
    configured flows and - for ``dc1-`` - that the shell cut it at its ``>``, otherwise."""
    wanted = canonical_flow(name)
    for flow in config.flows:
        if flow.name == wanted:
            return flow
    raise ConfigError([unknown_flow(config, name, option)])


def unknown_flow(config: DrkitConfig, name: str, option: str) -> Problem:
    """The problem of a flow name no flow has, with what the config has."""
    known = ", ".join(f.name for f in config.flows) or "none"
    cut = ""
    if name.endswith("-") and "->" not in name:
        cut = (f"; the shell cut it at '>' (and wrote a file named after the target): quote it "
               f"('{name}>TARGET') or write {name[:-1]}:TARGET")  # fmt: skip
    return Problem(option, f"no flow {name!r} in the config (flows: {known}){cut}")


def known_cluster(config: DrkitConfig, alias: str, option: str) -> None:
    """ConfigError naming ``option`` and the configured clusters unless ``alias`` is one."""
    if alias not in config.clusters:
        known = ", ".join(sorted(config.clusters))
        raise ConfigError([Problem(option, f"unknown cluster {alias!r} (clusters: {known})")])


def configured_flow(config: DrkitConfig, source: str, target: str) -> FlowConfig:
    """The configured flow ``source->target``; ConfigError naming --from/--to and the known
    flows otherwise."""
    try:
        return config.flow(f"{source}->{target}")
    except KeyError:
        flows = ", ".join(f.name for f in config.flows) or "none"
        raise ConfigError(
            [Problem("--from/--to", f"no flow {source}->{target} in the config (flows: {flows})")]
        ) from None


def flow_between(config: DrkitConfig, source: str, target: str) -> FlowConfig:
    """:func:`configured_flow` for a move: both clusters known (named by --from/--to), and
    two of them.  Light: checked before anything heavy loads."""
    known_cluster(config, source, "--from")
    known_cluster(config, target, "--to")
    if source == target:
        raise ConfigError(
            [Problem("--from/--to", f"both name {source}: a move needs two clusters")]
        )
    return configured_flow(config, source, target)
