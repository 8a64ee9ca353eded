"""Moved to :mod:`drkit.acl.rules` (issue 47): this alias stays only until its last two
importers, changed in parallel work, move too."""

from drkit.acl.rules import (
    ANY_USER,
    AclEntry,
    Need,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    authorized,
)

__all__ = [
    "ANY_USER",
    "AclEntry",
    "Need",
    "Operation",
    "PatternType",
    "Permission",
    "Resource",
    "ResourceType",
    "authorized",
]
