"""Other producers' open transactions on the promoted cluster: Kafka's kafka-transactions output
read (drkit.kafka.transactions_tool), and what the failover's abort_open_transactions step
decides over in-memory clusters - drkit's own transactional ids fenced, others named, and
aborted only when the run was given --abort-hanging-transactions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.cli.failover_cmd import producers_text
from drkit.errors import KafkaError
from drkit.failover.context import StepContext, StepFailed
from drkit.failover.model import StepState
from drkit.failover.results import TransactionsSettled
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import WARNING_KEY
from drkit.failover.steps.fencing import settle_transactions
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.transactions_tool import (
    JavaTool,
    OpenTransaction,
    TransactionsPort,
    TransactionsTool,
    TransactionsToolError,
    parse_listing,
    parse_producers,
    properties_text,
)
from drkit.records import TopicPartition
from tests.fake_kafka import FakeCluster
from tests.unit.test_failover_steps import World, _plan
from tests.unit.test_operator_trust import _config, _drkit, failed_run

REPLICA = "dc1.orders"
TP = TopicPartition(REPLICA, 0)

# What Kafka 4.1's tool prints (ToolsUtils.prettyPrintTable), a JVM warning above it.
PRODUCERS = "\n".join([
    "OpenJDK 64-Bit Server VM warning: Sharing is only supported for boot loader classes",
    "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
    "CurrentTransactionStartOffset",
    "1000      \t0            \t-1                    \t2           \t1764000000000\tNone",
    "1001      \t3            \t0                     \t0           \t1764000005000\t7",
    "",
])  # fmt: skip
LISTING = """\
TransactionalId     	Coordinator	ProducerId	TransactionState
app tx 1            	1          	1001      	Ongoing
drkit-dc1-dc2-w1    	2          	1002      	Empty
"""  # fmt: skip


def test_describe_producers_output_gives_the_open_transactions_only() -> None:
    assert parse_producers(PRODUCERS, TP) == [APP]
    header = PRODUCERS.splitlines()[1]
    assert parse_producers(f"{header}\n", TP) == []


def test_list_output_names_each_producer_id_blanks_in_an_id_kept() -> None:
    assert parse_listing(LISTING) == {1001: "app tx 1", 1002: "drkit-dc1-dc2-w1"}


@pytest.mark.parametrize(
    "output",
    ["", "Failed to describe producers\n", PRODUCERS.replace("\t7\n", "\tseven\n"),
     PRODUCERS.replace("\t7\n", "\n")],
)  # fmt: skip
def test_output_that_is_not_the_table_is_an_error_not_an_empty_answer(output: str) -> None:
    with pytest.raises(TransactionsToolError, match="describe-producers"):
        parse_producers(output, TP)


def test_a_transaction_reads_back_from_its_document_and_names_its_producer() -> None:
    named = parse_producers(PRODUCERS, TP)[0].named(parse_listing(LISTING))
    assert OpenTransaction.from_json(named.to_json()) == named
    text = str(named)
    assert "dc1.orders[0] from offset 7" in text and "1001" in text and "'app tx 1'" in text


def test_properties_text_keeps_a_pem_key_and_non_ascii_on_one_line_each() -> None:
    text = properties_text({"ssl.keystore.key": "-----BEGIN\nab\\c\n", "user": "jürg€"})
    assert text == "ssl.keystore.key=-----BEGIN\\nab\\\\c\\n\nuser=j\\u00fcrg\\u20ac\n"


def test_the_tool_names_its_missing_parts_in_one_line(tmp_path: Path) -> None:
    no_jars = TransactionsTool(JavaTool("java", tmp_path), "127.0.0.1:9")
    with pytest.raises(TransactionsToolError, match="no kafka-tools jar in"):
        no_jars.transactional_ids(5.0)
    (tmp_path / "kafka-tools-4.1.2.jar").write_bytes(b"")
    no_java = TransactionsTool(JavaTool(str(tmp_path / "no-java"), tmp_path), "127.0.0.1:9")
    with pytest.raises(TransactionsToolError, match="Java not found"):
        no_java.transactional_ids(5.0)
    with pytest.raises(TransactionsToolError, match="no time left"):
        no_java.transactional_ids(0.5)
    assert issubclass(TransactionsToolError, KafkaError)


# -- the step ---------------------------------------------------------------------------------


class FakeTool:
    """Kafka's transactions tool over a FakeCluster: the transactions a test opened, aborted by
    ending them on the cluster (records the calls)."""

    def __init__(self, cluster: FakeCluster, transactions: Iterable[OpenTransaction],
                 ids: dict[int, str] | None = None) -> None:  # fmt: skip
        self.cluster, self.open = cluster, list(transactions)
        self.ids = ids or {}
        self.aborted: list[OpenTransaction] = []
        self.described: list[TopicPartition] = []
        for txn in self.open:
            cluster.open_transaction(txn.topic, txn.partition)
            cluster.append(txn.topic, txn.partition, 3)

    def open_transactions(
        self, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> list[OpenTransaction]:
        wanted = list(partitions)
        self.described += wanted
        return [t for t in self.open if t.tp in wanted]

    def transactional_ids(self, timeout_s: float) -> dict[int, str]:
        return self.ids

    def abort(self, transaction: OpenTransaction, timeout_s: float) -> None:
        key = (transaction.tp, transaction.producer_id, transaction.start_offset)
        self.open = [t for t in self.open if (t.tp, t.producer_id, t.start_offset) != key]
        self.aborted.append(transaction)
        self.end(transaction)

    def end(self, transaction: OpenTransaction) -> None:
        if not any(t.tp == transaction.tp for t in self.open):
            self.cluster.end_transaction(transaction.topic, transaction.partition)


class Fences:
    """Fencing a transactional id: recorded, and its transactions ended on the fake tool."""

    def __init__(self, tool: FakeTool) -> None:
        self.tool, self.ids = tool, list[str]()

    def __call__(self, _endpoint: ClusterEndpoint, transactional_id: str, _t: float) -> None:
        self.ids.append(transactional_id)
        for txn in list(self.tool.open):
            if self.tool.ids.get(txn.producer_id) == transactional_id:
                self.tool.open.remove(txn)
                self.tool.end(txn)


APP = OpenTransaction(REPLICA, 0, 1001, 3, 0, 7, 1764000005000)
OURS = OpenTransaction("dc1.payments", 0, 1002, 0, 0, 0, 1764000006000)


def _settle(world: World, tool: TransactionsPort | KafkaError, abort: bool = False,
            fences: Fences | None = None) -> tuple[TransactionsSettled, str | None]:  # fmt: skip
    """The step's outcome over ``world`` with ``tool`` (or its error), and its warning."""

    def tools(_ctx: StepContext, cluster: str) -> TransactionsPort:
        assert cluster == "dc2"
        if isinstance(tool, KafkaError):
            raise tool
        return tool

    def no_fence(_endpoint: ClusterEndpoint, transactional_id: str, _t: float) -> None:
        raise AssertionError(f"fenced {transactional_id}")

    ctx = world.context(RunOptions(abort_hanging_transactions=abort))
    outcome = settle_transactions(ctx, 60.0, tools, fences or no_fence)
    assert outcome.state is StepState.DONE
    settled = TransactionsSettled.from_detail(outcome.detail)
    assert settled is not None
    return settled, outcome.detail.get(WARNING_KEY)


@pytest.fixture
def world(tmp_path: Path) -> World:
    built = World(tmp_path)
    built.clusters["dc2"].add_topic(REPLICA, 2)
    built.clusters["dc2"].add_topic("dc1.payments")
    built.clusters["dc2"].append(REPLICA, 0, 5)
    return built


def test_without_the_flag_other_producers_are_named_and_left_open(world: World) -> None:
    tool = FakeTool(world.clusters["dc2"], [APP], {1001: "app-1"})
    settled, warning = _settle(world, tool)
    assert [t.transactional_id for t in settled.others] == ["app-1"]
    assert settled.aborted == () and settled.still_open == ("dc1.orders[0]",)
    assert tool.described == [TP]  # only the partition behind an open transaction is asked
    assert warning is not None and "--abort-hanging-transactions" in warning
    assert "producer 1001 (transactional id 'app-1'" in warning


def test_with_the_flag_they_are_aborted_and_the_partition_is_stable_again(world: World) -> None:
    tool = FakeTool(world.clusters["dc2"], [APP], {1001: "app-1"})
    settled, warning = _settle(world, tool, abort=True)
    assert tool.aborted == [APP.named({1001: "app-1"})] == list(settled.aborted)
    assert settled.still_open == () and warning is None
    dc2 = world.clusters["dc2"]
    assert dc2.stable_offsets([TP]) == dc2.list_offsets([TP], "latest")


def test_drkits_own_transactional_id_is_fenced_never_aborted_by_offset(world: World) -> None:
    ids = {1001: "app-1", 1002: "drkit-dc1-dc2-w9"}
    tool = FakeTool(world.clusters["dc2"], [APP, OURS], ids)
    fences = Fences(tool)
    settled, _warning = _settle(world, tool, abort=True, fences=fences)
    assert fences.ids == ["drkit-dc1-dc2-w9"] and settled.fenced == ("drkit-dc1-dc2-w9",)
    assert [t.producer_id for t in tool.aborted] == [1001]
    assert [t.producer_id for t in settled.others] == [1001] and settled.still_open == ()


def test_no_open_transaction_runs_no_tool(world: World) -> None:
    settled, warning = _settle(world, TransactionsToolError("must not be asked"), abort=True)
    assert settled == TransactionsSettled((), ()) and warning is None


def test_a_tool_that_cannot_answer_is_reported_without_the_flag_and_fails_with_it(
    world: World,
) -> None:
    FakeTool(world.clusters["dc2"], [APP])
    missing = TransactionsToolError("kafka-transactions needs Java 17+: 'java' not found")
    settled, warning = _settle(world, missing)
    assert settled.still_open == ("dc1.orders[0]",) and settled.others == ()
    assert settled.unnamed_because == str(missing)
    assert warning is not None and "not named: kafka-transactions" in warning
    with pytest.raises(StepFailed, match="cannot be aborted: kafka-transactions needs Java"):
        _settle(world, missing, abort=True)


def test_a_transaction_that_ended_before_its_abort_is_not_counted_as_aborted(
    world: World,
) -> None:
    class EndedMeanwhile(FakeTool):
        def abort(self, transaction: OpenTransaction, timeout_s: float) -> None:
            self.open = []  # its coordinator timed it out first
            self.end(transaction)
            raise TransactionsToolError("Could not find any open transactions starting at 7")

    settled, _warning = _settle(world, EndedMeanwhile(world.clusters["dc2"], [APP]), abort=True)
    assert settled.aborted == () and settled.still_open == ()


def test_an_abort_the_broker_refuses_fails_the_step(world: World) -> None:
    class Refused(FakeTool):
        def abort(self, transaction: OpenTransaction, timeout_s: float) -> None:
            raise TransactionsToolError("kafka-transactions abort failed (exit 1): denied")

    with pytest.raises(StepFailed, match=r"could not abort dc1.orders\[0\] from offset 7"):
        _settle(world, Refused(world.clusters["dc2"], [APP]), abort=True)


def test_the_flag_is_kept_with_the_run_and_earlier_documents_read_without_it() -> None:
    asked = RunOptions(abort_hanging_transactions=True)
    assert RunOptions.from_json(asked.to_json()) == asked
    assert "abort_hanging_transactions" not in RunOptions().to_json()
    assert RunOptions.from_json({"force": False}).abort_hanging_transactions is False
    before = {"fenced_transactional_ids": [], "open_transactions": ["t[0]"]}  # as recorded so far
    assert TransactionsSettled.from_detail(before) == TransactionsSettled((), ("t[0]",))


# -- the commands -----------------------------------------------------------------------------


def test_the_plan_text_names_the_producers_of_the_open_transactions(world: World) -> None:
    plan = replace(_plan(), open_transactions=("dc1.orders[0] (stable 5 < end 9)",))
    tool = FakeTool(world.clusters["dc2"], [APP], {1001: "app-1"})
    text = producers_text(plan, lambda: tool)
    assert tool.described == [TP]
    assert "open transactions on dc2" in text and "--abort-hanging-transactions" in text
    assert "dc1.orders[0] from offset 7: producer 1001 (transactional id 'app-1'" in text

    def missing() -> TransactionsPort:
        raise TransactionsToolError("kafka-transactions needs Java 17+: 'java' not found")

    assert "producers not named (kafka-transactions needs Java" in producers_text(plan, missing)


def test_the_flag_beside_resume_is_refused_the_run_keeps_its_options(tmp_path: Path) -> None:
    config = _config(tmp_path)
    run_id = failed_run(tmp_path)
    args = ("failover", "--resume", str(run_id), "--abort-hanging-transactions", "--yes")
    done = _drkit(tmp_path, *args, "--config", config)
    assert done.exit_code == 2, done.output
    assert f"run {run_id} keeps the options it started with" in done.output
    assert "nothing was done" in done.output


def test_the_flag_without_java_is_refused_before_anything_is_planned(tmp_path: Path) -> None:
    config = _config(tmp_path)
    args = ["--state-dir", str(tmp_path / "state"), "switchover", "--from", "dc1", "--to", "dc2",
            "--abort-hanging-transactions", "--yes", "--config", config]  # fmt: skip
    empty = tmp_path / "bin"
    empty.mkdir()
    done = CliRunner().invoke(cli, args, env={"PATH": str(empty), "JAVA_HOME": str(empty)})
    assert done.exit_code == 2, done.output
    assert "--abort-hanging-transactions: needs Kafka's kafka-transactions tool" in done.output
    assert "Java 17+: 'java' not found" in done.output and "nothing was done" in done.output
