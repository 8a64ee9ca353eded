"""The status picture: one ``drkit.status/v2`` document for ``/api/status``, the page and
``drkit status``.

It sits above drkit.health (cluster and flow observations, quorum) and drkit.failover (the
active pointer, runs, pending fences) and reads what both wrote to the state store, so neither
of them imports upward.
"""

from drkit.status.current import current_status, status_source
from drkit.status.document import SCHEMA, StatusSnapshot, build_status

__all__ = ["SCHEMA", "StatusSnapshot", "build_status", "current_status", "status_source"]
