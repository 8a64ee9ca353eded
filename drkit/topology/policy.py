"""Replication policies: how a source topic is named on the target, and back.

Contract (both built-ins satisfy it; plugins must too):

* ``target_topic(source_alias, topic)`` is deterministic and injective for a given source.
* ``upstream(source_alias, target_topic)`` returns the source topic for a name
  ``target_topic`` produced, else None.
* ``is_remote_of(alias, topic)`` says whether ``topic`` is itself a replica of cluster
  ``alias``'s topic (used to avoid replicating a replica back to where it came from).

Plugins register a class under the ``drkit.replication_policies`` entry point; it is built with
the flow's ``separator``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from drkit.config.model import ReplicationPolicyConfig, ReplicationPolicyKind
from drkit.errors import ConfigError, Problem


@runtime_checkable
class ReplicationPolicy(Protocol):
    def target_topic(self, source_alias: str, topic: str) -> str: ...

    def upstream(self, source_alias: str, target_topic: str) -> str | None: ...

    def is_remote_of(self, alias: str, topic: str) -> bool: ...


@dataclass(frozen=True)
class IdentityPolicy:
    """The replica keeps the source name (``orders`` → ``orders``); for migrations and
    active-active set-ups where clients must not change topic names."""

    separator: str = "."

    def target_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def upstream(self, source_alias: str, target_topic: str) -> str | None:
        return target_topic

    def is_remote_of(self, alias: str, topic: str) -> bool:
        # Names carry no origin; loops are stopped by the provenance header instead.
        return False


@dataclass(frozen=True)
class PrefixPolicy:
    """MirrorMaker 2's default: ``orders`` from dc1 becomes ``dc1.orders`` on the target."""

    separator: str = "."

    def target_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def upstream(self, source_alias: str, target_topic: str) -> str | None:
        prefix = f"{source_alias}{self.separator}"
        return target_topic[len(prefix) :] if target_topic.startswith(prefix) else None

    def is_remote_of(self, alias: str, topic: str) -> bool:
        return topic.startswith(f"{alias}{self.separator}")


def build_policy(config: ReplicationPolicyConfig) -> ReplicationPolicy:
    """The policy named by ``config.kind``: built-in or an entry-point plugin."""
    if config.kind == ReplicationPolicyKind.IDENTITY:
        return IdentityPolicy(config.separator)
    if config.kind == ReplicationPolicyKind.PREFIX:
        return PrefixPolicy(config.separator)
    for entry in entry_points(group="drkit.replication_policies"):
        if entry.name == config.kind:
            policy = entry.load()(config.separator)
            if not isinstance(policy, ReplicationPolicy):
                raise ConfigError(
                    [Problem("replication_policy.kind", f"plugin {entry.value} is not a policy")]
                )
            return policy
    raise ConfigError([Problem("replication_policy.kind", f"unknown policy {config.kind!r}")])
