"""The config loader's check of each flow's pluggable parts: its replication policy and its
transforms are built from the config (plugins included), so an unknown kind, a bad option or a
route onto an internal topic fails when the config is loaded, not when a worker starts.

Handed to :func:`drkit.config.loader.load_config` by the edges (drkit.config_checks); the
config package itself imports nothing of topology.
"""

from __future__ import annotations

import re

from drkit.config.loader import GROUP_REFERENCE
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import ConfigError, Problem
from drkit.topology.internal_topics import is_internal
from drkit.topology.policy import build_policy
from drkit.topology.transforms import build_chain


def component_problems(config: DrkitConfig) -> list[Problem]:
    """Build each flow's pluggable parts (policy, transforms): one Problem per defect, its key
    path from the config's top (``flows[0].transforms[1].options.replacement``)."""
    problems: list[Problem] = []
    for index, flow in enumerate(config.flows):
        try:
            build_policy(flow.replication_policy)
        except ConfigError as err:
            problems.extend(Problem(f"flows[{index}].{p.path}", p.reason) for p in err.problems)
        transforms = _transform_problems(flow, f"flows[{index}].transforms")
        problems.extend(transforms)
        if transforms:
            continue  # build_chain would say the same, less precisely
        try:
            build_chain(flow.transforms, path=f"flows[{index}].transforms")
        except ConfigError as err:
            problems.extend(err.problems)
    return problems


def _transform_problems(flow: FlowConfig, path: str) -> list[Problem]:
    """What the built-in transforms' options get wrong that building them would name vaguely or
    not at all: a filter's regex (named by its key), a route onto an internal topic."""
    problems: list[Problem] = []
    for index, transform in enumerate(flow.transforms):
        where = f"{path}[{index}].options"
        if transform.type == "filter":
            for key in ("key_regex", "header_regex"):
                pattern = transform.options.get(key)
                if pattern is None:
                    continue
                try:
                    re.compile(str(pattern))
                except re.error as err:
                    problems.append(Problem(f"{where}.{key}", f"invalid regex: {err}"))
        elif transform.type == "route":
            replacement = transform.options.get("replacement")
            if isinstance(replacement, str) and (named := route_internal_name(replacement)):
                problems.append(Problem(f"{where}.replacement", (
                    f"{replacement!r} routes topics onto an internal name ({named}): Kafka's "
                    "__* topics and drkit's own are never a replica's name"
                )))  # fmt: skip
    return problems


def route_internal_name(replacement: str) -> str | None:
    """What makes a route's renamed topic internal, from the replacement's literal text (its
    start when the match starts the name, its end when the match ends it); None: not internal."""
    parts = GROUP_REFERENCE.split(replacement)
    head, tail = parts[0], parts[-1]
    if len(parts) == 1 and is_internal(head):
        return "a name Kafka or drkit keeps for itself"
    if head.startswith(("__", "_drkit")):
        return f"starting {head[:6]!r}"
    if tail.endswith(".internal"):
        return "ending '.internal'"
    return None
