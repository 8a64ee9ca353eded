"""Moved to :mod:`drkit.acl.fencing` (issue 47): this alias stays only until its last
importer, changed in parallel work, moves too."""

from drkit.acl.fencing import fence_acls, fence_acls_with, lift_acls

__all__ = ["fence_acls", "fence_acls_with", "lift_acls"]
