"""Other producers' open transactions on a cluster, through Kafka's own ``kafka-transactions``.

confluent-kafka (librdkafka 2.16) has no DescribeProducers, ListTransactions or abort admin
call; Kafka's Java tool (``org.apache.kafka.tools.TransactionsCommand``, kafka-transactions.sh)
has them.  :class:`TransactionsTool` runs it - ``java -cp <Kafka's jars>/*`` - one command per
call, each bound by a deadline:

* :meth:`TransactionsTool.open_transactions` - ``describe-producers`` per partition (asked only
  of partitions whose last stable offset is below their end: the few that hold one), each
  producer with a transaction open there as an :class:`OpenTransaction`;
* :meth:`TransactionsTool.transactional_ids` - ``list``: the transactional id behind each
  producer id the coordinators know (how a producer is named, and how drkit's own are told);
* :meth:`TransactionsTool.abort` - ``abort --start-offset``: Kafka's semantics - an abort marker
  for that producer's transaction on that partition, written whether or not its producer lives.

The connection's settings (security, with its secrets) go to the tool in a 0600 properties file
in a private temporary directory, removed after the call - never on the command line, never
logged; JVM system properties (the OAuth token endpoints Kafka's client may fetch) go in the
child's environment (``JDK_JAVA_OPTIONS``), which only its user may read.

Every failure - no Java, no jars, the tool's error, its deadline - is a
:class:`TransactionsToolError` whose message names the cause in one line.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from drkit.errors import KafkaError
from drkit.private_files import write_private
from drkit.records import TopicPartition
from drkit.timestamps import iso_utc

TOOL_CLASS = "org.apache.kafka.tools.TransactionsCommand"
_PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset")  # fmt: skip
_LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
_PARALLEL = 4  # tool processes at once (each a JVM: ~1 s of a core to start)


class TransactionsToolError(KafkaError):
    """Kafka's transactions tool could not answer: no Java, no Kafka jars, the tool's own error
    (named), unreadable output, or its deadline passed."""


@dataclass(frozen=True)
class OpenTransaction:
    """A producer's transaction open on one partition, as the partition's leader describes it:
    it began at ``start_offset``; ``transactional_id`` when a coordinator names the producer
    (None: none does - a hanging transaction in Kafka's sense, or the listing was not asked)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int
    transactional_id: str | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def named(self, transactional_ids: Mapping[int, str]) -> OpenTransaction:
        """This transaction with its producer's transactional id from ``transactional_ids``."""
        found = transactional_ids.get(self.producer_id, self.transactional_id)
        return OpenTransaction(
            self.topic, self.partition, self.producer_id, self.producer_epoch,
            self.coordinator_epoch, self.start_offset, self.last_timestamp_ms, found,
        )  # fmt: skip

    def __str__(self) -> str:
        who = f"transactional id {self.transactional_id!r}, " if self.transactional_id else ""
        last = iso_utc(self.last_timestamp_ms / 1000) if self.last_timestamp_ms >= 0 else "?"
        return (
            f"{self.topic}[{self.partition}] from offset {self.start_offset}: producer "
            f"{self.producer_id} ({who}epoch {self.producer_epoch}, last write {last})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "coordinator_epoch": self.coordinator_epoch,
            "start_offset": self.start_offset, "last_timestamp_ms": self.last_timestamp_ms,
            "transactional_id": self.transactional_id,
        }  # fmt: skip

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> OpenTransaction:
        transactional_id = raw.get("transactional_id")
        return cls(
            str(raw["topic"]), int(raw["partition"]), int(raw["producer_id"]),
            int(raw.get("producer_epoch", -1)), int(raw.get("coordinator_epoch", -1)),
            int(raw["start_offset"]), int(raw.get("last_timestamp_ms", -1)),
            None if transactional_id is None else str(transactional_id),
        )  # fmt: skip


def _rows(output: str, headers: Sequence[str], what: str) -> list[list[str]]:
    """The rows of the tool's table (``ToolsUtils.prettyPrintTable``: a header line, then one
    whitespace-separated line per row) - lines before the header (a JVM's or a logger's) are
    not the table.  TransactionsToolError when no header line is found."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if tuple(line.split()) == tuple(headers):
            return [row.split() for row in lines[index + 1 :] if row.strip()]
    raise TransactionsToolError(f"kafka-transactions {what}: no table in its output")


def parse_producers(output: str, tp: TopicPartition) -> list[OpenTransaction]:
    """``describe-producers`` output: the producers with a transaction open on ``tp`` (a
    ``CurrentTransactionStartOffset`` other than None)."""
    found = []
    for row in _rows(output, _PRODUCER_HEADERS, "describe-producers"):
        if len(row) != len(_PRODUCER_HEADERS):
            raise TransactionsToolError(f"kafka-transactions describe-producers: row {row}")
        pid, epoch, coordinator_epoch, _sequence, last, start = row
        if start == "None":
            continue
        try:
            found.append(OpenTransaction(
                tp.topic, tp.partition, int(pid), int(epoch), int(coordinator_epoch),
                int(start), int(last),
            ))  # fmt: skip
        except ValueError:
            raise TransactionsToolError(
                f"kafka-transactions describe-producers: not a number in row {row}"
            ) from None
    return found


def parse_listing(output: str) -> dict[int, str]:
    """``list`` output: each producer id's transactional id (an id with blanks keeps them
    inside; the last three columns are numbers and a state)."""
    ids: dict[int, str] = {}
    for row in _rows(output, _LIST_HEADERS, "list"):
        if len(row) < len(_LIST_HEADERS):
            raise TransactionsToolError(f"kafka-transactions list: row {row}")
        try:
            ids[int(row[-2])] = " ".join(row[:-3])
        except ValueError:
            raise TransactionsToolError(f"kafka-transactions list: row {row}") from None
    return ids


def properties_text(settings: Mapping[str, str]) -> str:
    """``settings`` as a Java .properties file (read as ISO-8859-1): backslashes doubled, line
    breaks as ``\\n``/``\\r`` (a PEM key is one value), separators in keys escaped, characters
    beyond ASCII as \\uXXXX (UTF-16 units)."""

    def escaped(text: str, key: bool) -> str:
        out = []
        for char in text:
            if char == "\\":
                out.append("\\\\")
            elif char in "\n\r\t":
                out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
            elif key and char in "=: #!":
                out.append("\\" + char)
            elif ord(char) < 128:
                out.append(char)
            else:
                units = char.encode("utf-16-be")
                out.extend(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
        return "".join(out)

    return "".join(f"{escaped(k, True)}={escaped(str(v), False)}\n" for k, v in settings.items())


class TransactionsPort(Protocol):
    """What the failover's abort_open_transactions step asks of a cluster's transactions
    (:class:`TransactionsTool`; an in-memory fake in the unit tests)."""

    def open_transactions(
        self, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> list[OpenTransaction]: ...

    def transactional_ids(self, timeout_s: float) -> dict[int, str]: ...

    def abort(self, transaction: OpenTransaction, timeout_s: float) -> None: ...


@dataclass(frozen=True)
class JavaTool:
    """Where the tool runs from: a ``java`` and the directory of Kafka's jars (kafka-tools and
    its dependencies: the ``kafka`` bundle of drkit.local.jars)."""

    java: str
    jars: Path


class TransactionsTool:
    """Kafka's transactions tool against one cluster (see the module docstring).

    ``client_properties``: the Java admin client's settings for the cluster (security included:
    written to a private file per call); ``system_properties``: JVM ``-D`` settings, passed in
    the child's environment."""

    def __init__(
        self,
        runtime: JavaTool,
        bootstrap_servers: str,
        client_properties: Mapping[str, str] | None = None,
        system_properties: Mapping[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.bootstrap_servers = bootstrap_servers
        self.client_properties = dict(client_properties or {})
        self.system_properties = dict(system_properties or {})

    def open_transactions(
        self, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> list[OpenTransaction]:
        """Every transaction open on ``partitions`` (ask only those whose last stable offset is
        below the end), by partition and start offset."""
        deadline = time.monotonic() + timeout_s
        wanted = sorted(set(partitions))

        def describe(tp: TopicPartition) -> list[OpenTransaction]:
            args = ["describe-producers", "--topic", tp.topic, "--partition", str(tp.partition)]
            return parse_producers(self._run(args, deadline), tp)

        with ThreadPoolExecutor(max_workers=min(_PARALLEL, max(1, len(wanted)))) as pool:
            found = [txn for txns in pool.map(describe, wanted) for txn in txns]
        return sorted(found, key=lambda t: (t.topic, t.partition, t.start_offset))

    def transactional_ids(self, timeout_s: float) -> dict[int, str]:
        """Each producer id the cluster's transaction coordinators know: its transactional id."""
        return parse_listing(self._run(["list"], time.monotonic() + timeout_s))

    def abort(self, transaction: OpenTransaction, timeout_s: float) -> None:
        """Abort ``transaction`` on its partition (Kafka's ``abort --start-offset``); a
        TransactionsToolError when the tool finds no transaction open from that offset any more
        or the broker refuses."""
        args = ["abort", "--topic", transaction.topic, "--partition", str(transaction.partition),
                "--start-offset", str(transaction.start_offset)]  # fmt: skip
        self._run(args, time.monotonic() + timeout_s)

    def _run(self, args: list[str], deadline: float) -> str:
        """The tool's stdout for ``args``; TransactionsToolError naming why it gave none."""
        command = args[0]
        left = deadline - time.monotonic()
        if left <= 1.0:
            raise TransactionsToolError(f"kafka-transactions {command}: no time left")
        jars = self.runtime.jars
        if not any(jars.glob("kafka-tools-*.jar")):
            raise TransactionsToolError(f"kafka-transactions: no kafka-tools jar in {jars}")
        # The admin client gives up within the call's time (its default is a minute).
        api_ms = max(1000, int((left - 2.0) * 1000))  # the JVM starts in the rest
        settings = {
            **self.client_properties,
            "default.api.timeout.ms": str(api_ms),
            "request.timeout.ms": str(min(api_ms, 30000)),
        }
        env = dict(os.environ)
        if self.system_properties:  # the launcher's "Picked up" note goes to stderr only
            options = (f"-D{k}={v}" for k, v in sorted(self.system_properties.items()))
            env["JDK_JAVA_OPTIONS"] = " ".join(options)
        with tempfile.TemporaryDirectory(prefix="drkit-txn-") as work:  # 0700
            config = Path(work) / "admin.properties"
            write_private(config, properties_text(settings))
            # A short-lived client: the JIT's first tier and one GC thread start it fastest.
            argv = [self.runtime.java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "-Dlog4j2.level=OFF", "-cp", f"{jars}/*", TOOL_CLASS,
                    "--bootstrap-server", self.bootstrap_servers,
                    "--command-config", str(config), *args]  # fmt: skip
            try:
                done = subprocess.run(
                    argv, capture_output=True, text=True, timeout=left, env=env, check=False
                )
            except FileNotFoundError:
                raise TransactionsToolError(
                    f"kafka-transactions: Java not found ({self.runtime.java})"
                ) from None
            except subprocess.TimeoutExpired:
                raise TransactionsToolError(
                    f"kafka-transactions {command}: no answer within {left:.0f} s "
                    f"from {self.bootstrap_servers}"
                ) from None
        if done.returncode != 0:
            raise TransactionsToolError(
                f"kafka-transactions {command} failed (exit {done.returncode}): "
                f"{_cause(done.stderr) or _cause(done.stdout) or 'no message'}"
            )
        return done.stdout


def _cause(text: str) -> str:
    """The tool's own message in ``text``: its last line that is not a stack frame or the
    launcher's note (the message the tool exits with; argparse's "error:" line after its
    usage); empty when there is none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    messages = [line for line in lines if not line.startswith(("at ", "... ", "NOTE: Picked"))]
    chosen = messages[-1] if messages else ""
    return chosen if len(chosen) <= 400 else chosen[:400] + "..."
