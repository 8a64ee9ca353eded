"""What a schema registry holds, and what copying one to another must do - pure decisions.

A record serialized with a schema registry carries the schema's *id* (Confluent's wire format:
a zero byte, the id, the payload).  A consumer on the standby resolves that id in the standby's
registry, so a copy is only right when every id means the same schema on both sides.  The
subjects and their versions must come along too: producers that move to the standby look their
schemas up by subject.

Invariants :func:`plan_sync` keeps:

* a schema id the target already holds with a *different* schema is a conflict, never copied
  over (it means both registries took writes - a split brain an operator must settle);
* a subject version that exists on both sides with different ids is a conflict as well;
* everything else the source has and the target lacks is missing - the copy's work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SchemaReference:
    """A schema another one imports (Avro named types, Protobuf imports, JSON $ref)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, order=True)
class SchemaVersion:
    """One version of one subject, as the Confluent-compatible API describes it."""

    subject: str
    version: int
    id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str
    references: tuple[SchemaReference, ...] = ()

    @property
    def content(self) -> tuple[str, str, tuple[SchemaReference, ...]]:
        """What the id stands for: equal contents are the same schema."""
        return (self.schema_type, self.schema, self.references)


@dataclass(frozen=True)
class SchemaSyncPlan:
    """The difference between a source's catalogue and a target's."""

    missing: tuple[SchemaVersion, ...]
    conflicts: tuple[str, ...]
    present: int

    @property
    def in_sync(self) -> bool:
        return not self.missing and not self.conflicts

    def missing_ids(self) -> tuple[int, ...]:
        return tuple(sorted({version.id for version in self.missing}))


def plan_sync(source: Iterable[SchemaVersion], target: Iterable[SchemaVersion]) -> SchemaSyncPlan:
    """What copying ``source`` onto ``target`` must add, and what it must not touch."""
    contents: dict[int, tuple[str, str, tuple[SchemaReference, ...]]] = {}
    ids: dict[tuple[str, int], int] = {}
    for held in target:
        contents[held.id] = held.content
        ids[(held.subject, held.version)] = held.id
    missing: list[SchemaVersion] = []
    conflicts: list[str] = []
    present = 0
    for wanted in sorted(source):
        held_content = contents.get(wanted.id)
        held_id = ids.get((wanted.subject, wanted.version))
        if held_content is not None and held_content != wanted.content:
            conflicts.append(
                f"id {wanted.id} is a different schema on the target than "
                f"{wanted.subject} version {wanted.version} on the source"
            )
        elif held_id is not None and held_id != wanted.id:
            conflicts.append(
                f"{wanted.subject} version {wanted.version} is id {held_id} on the target, "
                f"id {wanted.id} on the source"
            )
        elif held_id is None:
            missing.append(wanted)
        else:
            present += 1
    return SchemaSyncPlan(tuple(missing), tuple(conflicts), present)


def drift_lines(plan: SchemaSyncPlan, target: str) -> list[str]:
    """How ``drkit status`` names a registry that is behind or in conflict."""
    lines = [f"schema conflict on {target}: {conflict}" for conflict in plan.conflicts]
    if plan.missing:
        ids = plan.missing_ids()
        shown = ", ".join(str(i) for i in ids[:10]) + (" ..." if len(ids) > 10 else "")
        lines.append(
            f"{len(plan.missing)} schema version(s) missing on {target}'s registry (ids {shown})"
        )
    return lines
