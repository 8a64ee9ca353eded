"""Write fencing with ACLs: deny, lift and list DENY WRITE ACLs on topics (a KafkaAdmin part).

Changes are reported done only once a broker shows them: with KRaft, CreateAcls/DeleteAcls
return when the controller committed the change, and brokers apply it from the metadata log a
moment later - until then DescribeAcls (and the authorizer) still answer from the old state
(seen on Kafka 4.x: a fence read back at once was missing, and a second ``deny_writes`` called
the fenced topic bare again).
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from tenacity import retry, retry_if_result, stop_after_delay, wait_fixed

from drkit.acl import fencing, rules
from drkit.acl.rules import AclEntry
from drkit.errors import FatalKafkaError, RetriableKafkaError
from drkit.kafka.admin_base import AdminBase

_RESOURCE_TYPES = {
    rules.ResourceType.TOPIC: ResourceType.TOPIC,
    rules.ResourceType.GROUP: ResourceType.GROUP,
    rules.ResourceType.TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
    rules.ResourceType.CLUSTER: ResourceType.BROKER,  # librdkafka's name for CLUSTER
}
_PATTERN_TYPES = {
    rules.PatternType.LITERAL: ResourcePatternType.LITERAL,
    rules.PatternType.PREFIXED: ResourcePatternType.PREFIXED,
}
_ENTRY_OPERATIONS = {op: getattr(AclOperation, op.name) for op in rules.Operation}
_ENTRY_PERMISSIONS = {
    rules.Permission.ALLOW: AclPermissionType.ALLOW,
    rules.Permission.DENY: AclPermissionType.DENY,
}


# Keyed by object: confluent-kafka types a binding's fields loosely.
_RESOURCE_TYPE_OF: dict[object, rules.ResourceType] = {rd: o for o, rd in _RESOURCE_TYPES.items()}
_PATTERN_TYPE_OF: dict[object, rules.PatternType] = {rd: o for o, rd in _PATTERN_TYPES.items()}
_ENTRY_OPERATION_OF: dict[object, rules.Operation] = {rd: o for o, rd in _ENTRY_OPERATIONS.items()}
_ENTRY_PERMISSION_OF: dict[object, rules.Permission] = {
    rd: o for o, rd in _ENTRY_PERMISSIONS.items()
}


def _entry_binding(entry: AclEntry) -> AclBinding:
    resource = entry.resource
    return AclBinding(
        _RESOURCE_TYPES[resource.type], resource.name, _PATTERN_TYPES[resource.pattern],
        entry.principal, entry.host, _ENTRY_OPERATIONS[entry.operation],
        _ENTRY_PERMISSIONS[entry.permission],
    )  # fmt: skip


def _entry_of(binding: AclBinding) -> AclEntry | None:
    """The drkit value of any binding drkit can reason about; None for others (MATCH/ANY
    patterns, operations drkit never needs such as CLUSTER_ACTION)."""
    kind = _RESOURCE_TYPE_OF.get(binding.restype)
    pattern = _PATTERN_TYPE_OF.get(binding.resource_pattern_type)
    operation = _ENTRY_OPERATION_OF.get(binding.operation)
    permission = _ENTRY_PERMISSION_OF.get(binding.permission_type)
    if kind is None or pattern is None or operation is None or permission is None:
        return None
    resource = rules.Resource(kind, binding.name, pattern)
    return AclEntry(binding.principal, resource, operation, permission, binding.host)


class AclAdmin(AdminBase):
    # -- ACLs of any kind (drkit.access) ------------------------------------------------------

    def acl_entries(self, timeout_s: float | None = None) -> set[AclEntry]:
        """Every ACL on the cluster drkit can reason about (needs DESCRIBE on the cluster).

        Raises FatalKafkaError naming SECURITY_DISABLED when the brokers run no authorizer."""
        query = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
            AclOperation.ANY, AclPermissionType.ANY,
        )  # fmt: skip

        def run(t: float) -> set[AclEntry]:
            found = self._client.describe_acls(query, request_timeout=t).result(timeout=t)
            return {entry for binding in found if (entry := _entry_of(binding)) is not None}

        return self._call("describe ACLs", timeout_s, run)

    def authorizer_enabled(self, timeout_s: float | None = None) -> bool:
        """Whether the brokers run an authorizer (DescribeAcls answers SECURITY_DISABLED when
        they do not); other failures, a refusal included, propagate."""
        try:
            self.acl_entries(timeout_s)
        except FatalKafkaError as err:
            if "SECURITY_DISABLED" in str(err):
                return False
            raise
        return True

    def create_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Create ACLs (idempotent: an existing one is left as it is)."""
        bindings = [_entry_binding(entry) for entry in sorted(set(entries))]
        if bindings:
            self._create(bindings, "create ACLs", timeout_s)

    def delete_entries(self, entries: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Delete exactly these ACLs (an absent one is no error)."""
        filters = [
            AclBindingFilter(
                b.restype,
                b.name,
                b.resource_pattern_type,
                b.principal,
                b.host,
                b.operation,
                b.permission_type,
            )
            for b in (_entry_binding(entry) for entry in sorted(set(entries)))
        ]
        if not filters:
            return

        self._delete(filters, "delete ACLs", timeout_s)

    # -- write fencing (ACLs) ---------------------------------------------------------------

    @staticmethod
    def _acl_filter(
        topic: str | None,
        principal: str | None,
        operation: AclOperation,
        permission: AclPermissionType,
    ) -> AclBindingFilter:
        # None matches any topic / principal / host (librdkafka filters).
        return AclBindingFilter(
            ResourceType.TOPIC,
            topic,  # type: ignore[arg-type]
            ResourcePatternType.LITERAL,
            principal,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            operation,
            permission,
        )

    def _create(self, bindings: list[AclBinding], what: str, timeout_s: float | None) -> None:
        """CreateAcls for ``bindings``; every binding's result checked."""

        def run(t: float) -> None:
            for future in self._client.create_acls(bindings, request_timeout=t).values():
                future.result(timeout=t)

        self._call(what, timeout_s, run)

    def _delete(self, filters: list[AclBindingFilter], what: str, timeout_s: float | None) -> None:
        """DeleteAcls for ``filters``; every filter's result checked."""

        def run(t: float) -> None:
            for future in self._client.delete_acls(filters, request_timeout=t).values():
                future.result(timeout=t)

        self._call(what, timeout_s, run)

    def grant(self, wanted: Iterable[AclEntry], timeout_s: float | None = None) -> None:
        """Create literal topic ACLs of the fencing kinds (idempotent); done once a broker
        shows them."""
        wanted = set(wanted)
        if not wanted:
            return
        if not all(fencing.is_topic_acl(acl) for acl in wanted):
            raise ValueError("grant takes literal topic ACLs of the fencing kinds")
        self._create([_entry_binding(acl) for acl in wanted], "create ACLs", timeout_s)
        for principal in {acl.principal for acl in wanted}:
            mine = {acl for acl in wanted if acl.principal == principal}
            self._await_acls(principal, mine, set(), timeout_s)

    def allow_everything(self, principal: str, timeout_s: float | None = None) -> None:
        """ALLOW ALL on every topic, group, transactional id and the cluster for ``principal``
        (wildcard literal ACLs).  The local secured clusters grant it to drkit's principal
        until per-role least-privilege ACLs exist; never used on an operator's cluster."""
        resources = [
            (ResourceType.TOPIC, "*"),
            (ResourceType.GROUP, "*"),
            (ResourceType.TRANSACTIONAL_ID, "*"),
            (ResourceType.BROKER, "kafka-cluster"),
        ]
        allow = (AclOperation.ALL, AclPermissionType.ALLOW)
        bindings = [
            AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", *allow)
            for kind, name in resources
        ]
        self._create(bindings, "create ACLs", timeout_s)

    def topics_with_acls(self, timeout_s: float | None = None) -> set[str]:
        """Topics that have any literal ACL (for any principal)."""
        query = self._acl_filter(None, None, AclOperation.ANY, AclPermissionType.ANY)

        def run(t: float) -> set[str]:
            found = self._client.describe_acls(query, request_timeout=t).result(timeout=t)
            return {binding.name for binding in found}

        return self._call("describe ACLs", timeout_s, run)

    def deny_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        keep_reads: bool = True,
        timeout_s: float | None = None,
        companions: Iterable[str] | None = None,
    ) -> set[str]:
        """Fence: a DENY WRITE ACL per topic for ``principal`` (idempotent).

        With ``keep_reads``, topics that had no ACL also get ALLOW READ/DESCRIBE/
        DESCRIBE_CONFIGS for ``principal``, so only writes stop (drkit.acl.fencing); those
        topics are returned (:meth:`allow_writes` removes the same).  ``companions`` names
        them instead (a caller that recorded them before fencing: a second attempt after a
        half-applied one finds them no longer bare).  Needs an authorizer on the brokers
        (``drkit local up`` enables StandardAuthorizer); without one the request fails with
        SECURITY_DISABLED.
        """
        names = sorted(set(topics))
        if not names:
            return set()
        if companions is not None:
            bare, wanted = fencing.fence_acls_with(names, principal, companions)
        else:
            existing = self.topics_with_acls(timeout_s) if keep_reads else set()
            bare, wanted = fencing.fence_acls(names, principal, keep_reads, existing)
        bindings = [_entry_binding(acl) for acl in wanted]
        self._create(bindings, "create fencing ACLs", timeout_s)
        self._await_acls(principal, set(wanted), set(), timeout_s)
        return set(bare)

    def allow_writes(
        self,
        topics: Iterable[str],
        principal: str = "User:*",
        reads_allowed: Iterable[str] = (),
        timeout_s: float | None = None,
    ) -> None:
        """Lift the fence of :meth:`deny_writes` (idempotent); ``reads_allowed``: the topics
        whose companion ALLOW ACLs it added."""
        lifted = fencing.lift_acls(topics, principal, reads_allowed)
        filters = [
            self._acl_filter(
                acl.resource.name,
                acl.principal,
                _ENTRY_OPERATIONS[acl.operation],
                _ENTRY_PERMISSIONS[acl.permission],
            )
            for acl in lifted
        ]
        if not filters:
            return

        self._delete(filters, "delete fencing ACLs", timeout_s)
        self._await_acls(principal, set(), set(lifted), timeout_s)

    def principal_acls(self, principal: str, timeout_s: float | None = None) -> set[AclEntry]:
        """Every fencing-kind literal topic ACL of ``principal``, as a broker shows them now."""
        return self._principal_acls(principal, timeout_s)

    def _principal_acls(self, principal: str, timeout_s: float | None) -> set[AclEntry]:
        """See :meth:`principal_acls`."""
        query = self._acl_filter(None, principal, AclOperation.ANY, AclPermissionType.ANY)

        def run(t: float) -> set[AclEntry]:
            found = self._client.describe_acls(query, request_timeout=t).result(timeout=t)
            return {
                acl
                for binding in found
                if (acl := _entry_of(binding)) is not None and fencing.is_topic_acl(acl)
            }

        return self._call("describe ACLs", timeout_s, run)

    def _await_acls(
        self,
        principal: str,
        present: set[AclEntry],
        absent: set[AclEntry],
        timeout_s: float | None,
    ) -> None:
        """Block until a broker shows every ACL of ``present`` and none of ``absent`` (see the
        module docstring); RetriableKafkaError at the deadline."""
        deadline = self._deadline(timeout_s)

        @retry(
            retry=retry_if_result(lambda settled: not settled),
            stop=stop_after_delay(deadline),
            wait=wait_fixed(0.1),
            retry_error_callback=lambda _state: False,
        )
        def settled() -> bool:
            visible = self._principal_acls(principal, timeout_s)
            return present <= visible and not absent & visible

        if not settled():
            raise RetriableKafkaError(
                f"{self.endpoint.alias}: ACL changes for {principal} not visible after "
                f"{deadline:.0f}s"
            )

    def write_denied(self, principal: str = "User:*", timeout_s: float | None = None) -> set[str]:
        """Topics with a literal DENY WRITE ACL for ``principal`` (the fenced ones)."""
        query = self._acl_filter(None, principal, AclOperation.WRITE, AclPermissionType.DENY)

        def run(t: float) -> set[str]:
            found = self._client.describe_acls(query, request_timeout=t).result(timeout=t)
            return {binding.name for binding in found}

        return self._call("describe ACLs", timeout_s, run)
