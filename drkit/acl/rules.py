"""Kafka ACLs as values, and how Kafka's authorizer decides with them (pure).

:class:`AclEntry` is one ACL binding (who, may or may not, do what, on which resource);
:class:`Need` is one permission a drkit role needs, with the reason it needs it.
:func:`authorized` answers "would the broker let ``principal`` do this?" the way Kafka's
StandardAuthorizer does, so ``drkit doctor`` can name a missing ACL without trying the
operation:

* a super user may do anything;
* an ACL applies to a resource when its pattern is LITERAL and names it (or is the wildcard
  ``*``), or is PREFIXED by a prefix of its name; and to a principal when it names it or
  ``User:*``;
* any applicable DENY (for the operation or ALL) wins over every ALLOW;
* an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE; of ALTER_CONFIGS, DESCRIBE_CONFIGS;
* a resource no ACL applies to at all is allowed only with ``allow.everyone.if.no.acl.found``.

ACLs for particular hosts are treated as not applying (drkit cannot know the client's address);
that errs towards "missing" for ALLOWs and towards "allowed" for DENYs, which the doctor says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class ResourceType(StrEnum):
    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional_id"
    CLUSTER = "cluster"


class PatternType(StrEnum):
    LITERAL = "literal"
    PREFIXED = "prefixed"


class Operation(StrEnum):
    ALL = "all"
    READ = "read"
    WRITE = "write"
    CREATE = "create"
    DELETE = "delete"
    ALTER = "alter"
    DESCRIBE = "describe"
    DESCRIBE_CONFIGS = "describe_configs"
    ALTER_CONFIGS = "alter_configs"
    IDEMPOTENT_WRITE = "idempotent_write"


class Permission(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
ANY_USER = "User:*"


@dataclass(frozen=True, order=True)
class Resource:
    """A resource pattern: a literal name (``*``: every name), or a name prefix."""

    type: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL

    @classmethod
    def cluster(cls) -> Resource:
        return cls(ResourceType.CLUSTER, CLUSTER_NAME)

    def covers(self, other: Resource) -> bool:
        """Whether an ACL on this pattern applies to every resource ``other`` stands for."""
        if self.type is not other.type:
            return False
        if self.pattern is PatternType.LITERAL:
            if self.name == WILDCARD:
                return True
            return other.pattern is PatternType.LITERAL and other.name == self.name
        if other.name == WILDCARD and other.pattern is PatternType.LITERAL:
            return False
        return other.name.startswith(self.name)

    def overlaps(self, other: Resource) -> bool:
        """Whether an ACL on this pattern applies to at least one resource of ``other``."""
        if self.type is not other.type:
            return False
        if self.covers(other) or other.covers(self):
            return True
        if self.pattern is PatternType.PREFIXED and other.pattern is PatternType.PREFIXED:
            return self.name.startswith(other.name) or other.name.startswith(self.name)
        return False

    def __str__(self) -> str:
        if self.type is ResourceType.CLUSTER:
            return "the cluster"
        kind = self.type.value.replace("_", " ")
        if self.pattern is PatternType.PREFIXED:
            return f"{kind}s prefixed {self.name!r}"
        if self.name == WILDCARD:
            return f"every {kind}"
        return f"{kind} {self.name!r}"


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL binding, from any host (``host`` ``*``) unless it says otherwise."""

    principal: str
    resource: Resource
    operation: Operation
    permission: Permission = Permission.ALLOW
    host: str = WILDCARD

    def __str__(self) -> str:
        return (
            f"{self.permission.value.upper()} {self.principal} "
            f"{self.operation.value.upper()} on {self.resource}"
        )


@dataclass(frozen=True, order=True)
class Need:
    """One permission a role needs on one cluster, and why (shown when it is missing)."""

    resource: Resource
    operation: Operation
    why: str

    def entry(self, principal: str) -> AclEntry:
        """The ALLOW ACL that grants this need to ``principal``."""
        return AclEntry(principal, self.resource, self.operation)


# ALLOWing any of these also allows DESCRIBE (Kafka's implied operations).
_IMPLIES_DESCRIBE = frozenset(
    {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE}
)


def _allows(granted: Operation, wanted: Operation) -> bool:
    if granted in (Operation.ALL, wanted):
        return True
    if wanted is Operation.DESCRIBE:
        return granted in _IMPLIES_DESCRIBE
    if wanted is Operation.DESCRIBE_CONFIGS:
        return granted is Operation.ALTER_CONFIGS
    return False


def _applies_to(entry: AclEntry, principal: str) -> bool:
    return entry.host == WILDCARD and entry.principal in (principal, ANY_USER)


def authorized(
    principal: str,
    need: Need,
    entries: Iterable[AclEntry],
    *,
    super_users: Iterable[str] = (),
    allow_everyone_if_no_acl: bool = False,
) -> bool:
    """Whether ``principal`` may do ``need`` given the cluster's ACLs (module docstring).

    For a prefixed or wildcard need ("every topic prefixed dc1."), an ALLOW must cover the whole
    pattern and no DENY may overlap it: the answer holds for every name the pattern stands for.
    """
    if principal in set(super_users):
        return True
    entries = list(entries)
    wanted = need.resource
    for entry in entries:
        if (
            entry.permission is Permission.DENY
            and _applies_to(entry, principal)
            and entry.operation in (Operation.ALL, need.operation)
            and entry.resource.overlaps(wanted)
        ):
            return False
    if any(
        entry.permission is Permission.ALLOW
        and _applies_to(entry, principal)
        and _allows(entry.operation, need.operation)
        and entry.resource.covers(wanted)
        for entry in entries
    ):
        return True
    if allow_everyone_if_no_acl:
        return not any(entry.resource.overlaps(wanted) for entry in entries)
    return False


def missing(
    principal: str,
    needs: Iterable[Need],
    entries: Iterable[AclEntry],
    *,
    super_users: Iterable[str] = (),
    allow_everyone_if_no_acl: bool = False,
) -> tuple[Need, ...]:
    """The needs of ``needs`` that ``principal`` does not hold, in order."""
    entries, supers = list(entries), frozenset(super_users)
    return tuple(
        need
        for need in needs
        if not authorized(
            principal,
            need,
            entries,
            super_users=supers,
            allow_everyone_if_no_acl=allow_everyone_if_no_acl,
        )
    )


def newly_checked(existing: Iterable[AclEntry], added: Iterable[AclEntry]) -> tuple[Resource, ...]:
    """The resources of ``added`` that no ACL of ``existing`` applies to throughout: once
    ``added`` exist, Kafka's authorizer checks ACLs there, so on a cluster that lets everyone in
    where no ACL is found (``allow.everyone.if.no.acl.found``) every principal the new ACLs do
    not name - the applications - is locked out of them (``drkit acls --apply`` warns)."""
    have = [entry.resource for entry in existing]
    closed: list[Resource] = []
    for entry in added:
        resource = entry.resource
        if resource not in closed and not any(h.covers(resource) for h in have):
            closed.append(resource)
    return tuple(sorted(closed))


_LITERAL_REGEX = re.compile(r"(?:[A-Za-z0-9_-]|\\[.-])+")
_LOOSE_NAME = re.compile(r"[A-Za-z0-9._-]+")


def resource_for_pattern(kind: ResourceType, regex: str) -> tuple[Resource, bool]:
    """The ACL resource for the names the (whole-name) ``regex`` matches, and whether it
    stands for exactly those names.

    ``orders`` or ``orders\\.v1``: a literal; ``orders.*`` or ``orders\\..*``: a prefix;
    ``.*``: every name - all exact.  ``orders.v1`` (a dot meant as a dot) gives the literal
    ``orders.v1``, not exact (the regex also matches ``ordersXv1``).  Any other regex cannot be
    written as a Kafka ACL: every name, not exact.  ``drkit acls`` says when it is not exact.
    """
    if regex in (".*", ".+"):
        return Resource(kind, WILDCARD), True
    found = _exact_resource(kind, regex)
    if found is not None:
        return found, True
    body, tail = (regex[:-2], ".*") if regex.endswith(".*") else (regex, "")
    if _LOOSE_NAME.fullmatch(body):
        loose = _exact_resource(kind, body.replace(".", "\\.") + tail)
        if loose is not None:
            return loose, False
    return Resource(kind, WILDCARD), False


def _exact_resource(kind: ResourceType, regex: str) -> Resource | None:
    if regex.endswith(".*") and _LITERAL_REGEX.fullmatch(regex[:-2]):
        return Resource(kind, _unescape(regex[:-2]), PatternType.PREFIXED)
    if _LITERAL_REGEX.fullmatch(regex):
        return Resource(kind, _unescape(regex))
    return None


def _unescape(text: str) -> str:
    return text.replace("\\.", ".").replace("\\-", "-")
