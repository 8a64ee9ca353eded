"""The one exception hierarchy of drkit.

Every error drkit raises on purpose derives from :class:`DrkitError`.  The CLI boundary turns a
``DrkitError`` into a one-line message and a non-zero exit code; anything else is a bug and keeps
its traceback.

Branches:

* :class:`ConfigError` - the operator's input is wrong (config file, CLI arguments).  Carries one
  :class:`Problem` per defect so that all of them can be reported at once.
* :class:`KafkaError` - talking to a cluster failed.  :class:`RetriableKafkaError` may succeed if
  tried again (callers retry with a deadline); :class:`FatalKafkaError` never will
  (:class:`CredentialsRefusedError`: the cluster refused drkit's login).
* :class:`UnreachableClusterError` - a cluster did not answer within the deadline.
* :class:`LocalClusterError` - the local Maven-based Kafka clusters could not be managed.
* :class:`StateStoreError` - the SQL state store is unreachable or not migrated.
* :class:`ReplicationError` - a flow stopped because continuing would lose or corrupt data.
* :class:`AccountingError` - the Spark accounting job could not run to its end.
* :class:`FailpointError` - a failpoint armed in ``DRKIT_FAILPOINTS`` fired (drkit.failpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """What every drkit command's exit status means - one meaning per number, for every command
    (``drkit --help``, each command's help and the README print :data:`EXIT_CODES_TEXT`)."""

    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    UNHEALTHY = 3
    BLOCKED = 4
    LEASE = 5
    ROLLED_BACK = 6
    VETOED = 7
    ABANDONED = 8
    NOT_PROVEN = 9
    REPLICATION_STOPPED = 10
    INTERRUPTED = 130


EXIT_MEANINGS = {
    ExitCode.OK: "done; or every check passed",
    ExitCode.FAILED: "the operation failed (a failover step failed: resume the run)",
    ExitCode.BAD_INPUT: "bad config, arguments or file: nothing was done",
    ExitCode.UNHEALTHY: "a check found a problem (a cluster down, an ACL missing, ...)",
    ExitCode.BLOCKED: "the plan has a blocker (also under --plan): nothing was done",
    ExitCode.LEASE: "another failover run holds the lease, or this one lost it",
    ExitCode.ROLLED_BACK: "a planned move failed and was undone",
    ExitCode.VETOED: "a before-hook vetoed a step",
    ExitCode.ABANDONED: "an interrupted run's premise no longer held: abandoned",
    ExitCode.NOT_PROVEN: "the records disprove it (verify found loss; a drill breached policy)",
    ExitCode.REPLICATION_STOPPED: "replicate: a flow stopped on an error it cannot ride out",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
EXIT_CODES_TEXT = "\n".join(f"{code.value:>3}  {EXIT_MEANINGS[code]}" for code in ExitCode)


class DrkitError(Exception):
    """Base of every error drkit raises deliberately; ``str(err)`` is a complete sentence."""

    exit_code: int = ExitCode.FAILED


@dataclass(frozen=True)
class Problem:
    """One defect in operator input: where it is (a dotted key path) and why it is wrong."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class ConfigError(DrkitError):
    """The configuration (file, environment or CLI arguments) is invalid."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, problems: list[Problem], source: str = "") -> None:
        self.problems = tuple(problems)
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__("; ".join(f"{where}{p}" for p in problems) or f"{where}invalid")

    def lines(self) -> list[str]:
        """One line per problem, each naming the key path and the reason."""
        where = f"{self.source}: " if self.source else ""
        return [f"{where}{p}" for p in self.problems]


class KafkaError(DrkitError):
    """A Kafka client or admin call failed."""


class RetriableKafkaError(KafkaError):
    """A Kafka call failed in a way that may succeed when retried (leader moved, timeout...)."""


class FatalKafkaError(KafkaError):
    """A Kafka call failed in a way retrying the call at once cannot fix.

    ``ends_flows``: whether a long-running replication flow must stop on it - True for what
    only an operator can fix (authorization, a bad setting, a record the target refuses); False
    for an answer a flow outwaits by starting its session again (a topic deleted under it, no
    partition leader yet, a local client state): drkit.replication.supervision retries those.
    """

    def __init__(self, message: str, ends_flows: bool = True) -> None:
        super().__init__(message)
        self.ends_flows = ends_flows

    def __reduce__(self) -> tuple[object, ...]:
        # Crosses process boundaries (drkit.kafka.isolated) with its flag.
        return (type(self), (str(self), self.ends_flows))


class ClientSettingsRefused(FatalKafkaError):
    """librdkafka refused to create a client from the settings drkit built for a cluster (an
    unknown or invalid property, a file it cannot read, an empty secret): bad input, named.
    ``key``: the config key behind it; ``reason``: what librdkafka said (both in the message;
    across a process boundary only the message travels)."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self, message: str, ends_flows: bool = True, key: str = "", reason: str = ""
    ) -> None:
        super().__init__(message, ends_flows)
        self.key, self.reason = key, reason


class CommitLogUnreadable(FatalKafkaError):
    """The source's ``__consumer_offsets`` cannot be followed: this principal may not read it,
    or it holds a record this drkit cannot decode (a format newer than it knows)."""


class CredentialsRefusedError(FatalKafkaError):
    """The cluster answered but refused drkit's login (wrong password, unknown user, mechanism
    not enabled): retrying cannot help, and the cluster is not unreachable."""


class UnreachableClusterError(KafkaError):
    """A cluster did not answer metadata requests within the deadline (exit 3 in every
    command: a cluster down is what a check finds)."""

    exit_code = ExitCode.UNHEALTHY

    def __init__(self, cluster: str, bootstrap_servers: str, detail: str = "") -> None:
        self.cluster = cluster
        self.bootstrap_servers = bootstrap_servers
        self.detail = detail  # why, when known: what answered instead, the client's error
        suffix = f" ({detail})" if detail else ""
        super().__init__(f"cluster {cluster!r} at {bootstrap_servers} is unreachable{suffix}")


class LocalClusterError(DrkitError):
    """The local Kafka clusters (from Maven Central jars) could not be set up or managed."""


class StateStoreError(DrkitError):
    """The state store could not be reached, migrated or written."""


class StoreUrlUnusable(StateStoreError):
    """The state store URL names no database drkit can use (no such driver, unparseable):
    bad input, nothing was done."""

    exit_code = ExitCode.BAD_INPUT


class StoreFromNewerDrkit(StateStoreError):
    """The state store is at a migration this drkit does not have: a newer drkit wrote it.
    Nothing is read or written (this drkit cannot know what the newer tables mean)."""

    exit_code = ExitCode.BAD_INPUT


class NotAStore(StateStoreError):
    """The state store's SQLite file is some other file (not a database): the operator named
    the wrong file - bad input; nothing is read or written."""

    exit_code = ExitCode.BAD_INPUT


class ReplicationError(DrkitError):
    """A replication flow stopped because going on would skip or corrupt records."""


class AccountingError(DrkitError):
    """The Spark accounting job failed before it could give a verdict (nothing was recorded)."""


class DrillFailed(DrkitError):
    """A drill could not run to a report (the cause is named); its fault was undone."""


class LeaseLost(DrkitError):
    """This actor no longer holds its lease (taken over, or unconfirmable): stop acting now.
    (drkit.failover.lease; the cluster adapters raise it too, for a side effect whose lease's
    budget ran out before it was sent - drkit.clock.Budget.)"""

    exit_code = ExitCode.LEASE


class Stopped(DrkitError):
    """The process is stopping: a request to a cluster was given up while it waited (the
    request itself runs on to its own timeout on a daemon thread; drkit.kafka.interruptible).
    A caller that was asked to stop treats it as the stop, never as a failure."""


class FailpointError(DrkitError):
    """A failpoint armed with ``error`` fired: the operation fails as a cluster error would."""


class SchemaRegistryError(DrkitError):
    """A schema registry did not answer, refused a request, or holds schemas that conflict
    with the ones drkit would copy (drkit.schemas)."""
