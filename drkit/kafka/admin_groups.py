"""Consumer-group admin requests (a KafkaAdmin part).

librdkafka 2.11-2.16 can abort the process when a broker restarts while these requests are in
flight, so the public methods run them in a helper process (drkit.kafka.isolated) that calls
the ``_direct_*`` methods.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as _RdTopicPartition
from confluent_kafka.admin import AdminClient

from drkit.errors import RetriableKafkaError
from drkit.kafka.admin_base import AdminBase, GroupOffsets, GroupState
from drkit.kafka.clients import client_settings, make_admin_client
from drkit.kafka.errors import is_code, translate
from drkit.records import TopicPartition, shared_partition

_PARALLEL_CLIENTS = 32
_WAVE = 200  # group requests in flight per admin client at most (see GroupAdmin._spread)
_LIST_FIRST = 25  # more groups than this are listed before any is described
# Listed states that need no describe: no member can be in them.
_QUIET_STATES = frozenset({"EMPTY", "DEAD"})
V = TypeVar("V")


def _alter(
    client: AdminClient, requests: Mapping[str, ConsumerGroupTopicPartitions], timeout: float
) -> dict[str, str | None]:
    """Send every group's request, then collect: None per group, or why it was refused."""
    futures = {
        group: client.alter_consumer_group_offsets([request], request_timeout=timeout)[group]
        for group, request in requests.items()
    }
    out: dict[str, str | None] = {}
    for group, future in futures.items():
        try:
            result = future.result(timeout=timeout)
        except KafkaException as err:
            out[group] = str(translate(err, f"commit {group}"))
            continue
        refused = [tp for tp in result.topic_partitions if tp.error is not None]
        out[group] = str(translate(refused[0].error, f"commit {group}")) if refused else None
    return out


def _offset_rows(
    requests: Mapping[str, Mapping[TopicPartition, int]],
) -> dict[str, list[tuple[str, int, int]]]:
    """Per group, its offsets as ``(topic, partition, offset)`` rows."""
    return {
        group: [(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        for group, offsets in requests.items()
    }


class GroupAdmin(AdminBase):
    # -- consumer groups ------------------------------------------------------------------

    def list_groups(self, timeout_s: float | None = None, complete: bool = False) -> dict[str, str]:
        """Every consumer group with its state name.  ``complete``: only a listing every
        broker answered (retried until the timeout) - a broker that did not answer would
        make its groups look absent, and a cluster that does not answer look empty."""

        def listing(t: float) -> dict[str, str]:
            states, answered = self._listing(t)
            if complete and not answered:
                raise RetriableKafkaError(
                    f"{self.endpoint.alias}: not every broker answered the group listing"
                )
            return states

        return self._call("list consumer groups", timeout_s, listing)

    def _listing(self, t: float) -> tuple[dict[str, str], bool]:
        """(every listed consumer group's state name, whether every broker answered)."""
        result = self._client.list_consumer_groups(request_timeout=t).result(timeout=t)
        states = {
            g.group_id: (g.state.name if g.state is not None else "UNKNOWN") for g in result.valid
        }
        return states, not result.errors

    def other_groups(self, timeout_s: float | None = None) -> tuple[str, ...]:
        """Groups the brokers hold that are not consumer groups - share groups (KIP-932),
        streams groups (KIP-1071): no committed offsets to translate.

        librdkafka lists and describes consumer groups only; the older ListGroups call names
        groups of every type, so these are the names it adds.  It lists first: a consumer
        group created between the two calls shows in both, never here."""

        def run(t: float) -> tuple[str, ...]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the only way to ask
                every = {str(g.id) for g in self._client.list_groups(timeout=t)}
            consumer = self._client.list_consumer_groups(request_timeout=t).result(timeout=t)
            return tuple(sorted(every - {g.group_id for g in consumer.valid}))

        return self._call("list groups of every type", timeout_s, run)

    def _direct_describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        """State and member count of each group.  Beyond ``_LIST_FIRST`` groups, one listing
        answers for the groups it shows without members (empty) or does not show (dead, as a
        describe answers for a group that does not exist), and only the rest are described:
        a failover's groups are empty or absent on the target, and 10,000 describes cost
        seconds where one listing per broker costs milliseconds."""
        names = list(groups)
        listed = self._listed_states(timeout_s) if len(names) > _LIST_FIRST else None
        if listed is None:
            return self._describe_each(names, timeout_s)
        states = {g: listed.get(g, "DEAD") for g in names}
        quiet = {g: GroupState(g, s, 0) for g, s in states.items() if s in _QUIET_STATES}
        rest = [g for g, s in states.items() if s not in _QUIET_STATES]
        return {**quiet, **self._describe_each(rest, timeout_s)}

    def _listed_states(self, timeout_s: float | None) -> dict[str, str] | None:
        """Every consumer group's state as the brokers list it; None when a broker did not
        answer (a group it coordinates would look absent)."""

        def run(t: float) -> dict[str, str] | None:
            states, complete = self._listing(t)
            return states if complete else None

        return self._call("list consumer groups", timeout_s, run)

    def _describe_each(self, names: list[str], timeout_s: float | None) -> dict[str, GroupState]:
        def describe(client: AdminClient, some: list[str], t: float) -> dict[str, GroupState]:
            futures = [
                client.describe_consumer_groups(some[i : i + 100], request_timeout=t)
                for i in range(0, len(some), 100)
            ]
            out: dict[str, GroupState] = {}
            for batch in futures:
                for name, future in batch.items():
                    desc = future.result(timeout=t)
                    state = desc.state.name if desc.state is not None else "UNKNOWN"
                    out[name] = GroupState(name, state, len(desc.members))
            return out

        # Over several clients: 1,000 groups took 0.69 s in one request, 0.36 s over 8 here.
        return self._spread(names, "describe consumer groups", timeout_s, describe)

    def _direct_group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        """The committed offsets of ``group`` (partitions without a commit are left out)."""

        def run(t: float) -> GroupOffsets:
            futures = self._client.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=t
            )
            result = futures[group].result(timeout=t)
            offsets = {
                TopicPartition(tp.topic, tp.partition): int(tp.offset)
                for tp in result.topic_partitions
                if tp.offset >= 0 and tp.error is None
            }
            return GroupOffsets(group, offsets)

        return self._call(f"offsets of group {group}", timeout_s, run)

    def _direct_group_offset_rows(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, list[tuple[str, int, int]]]:
        """Committed offsets of many groups as ``(topic, partition, offset)`` rows: one request
        each, spread over clients in waves (``_spread``).  Groups that vanished between listing
        and this call are left out.  Rows, not TopicPartition keys, because they cross from the
        isolated helper (see ``_direct_alter_group_rows``)."""

        def fetch(
            client: AdminClient, names: list[str], t: float
        ) -> dict[str, list[tuple[str, int, int]]]:
            futures = {
                name: client.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(name)], request_timeout=t
                )[name]
                for name in names
            }
            out: dict[str, list[tuple[str, int, int]]] = {}
            for name, future in futures.items():
                try:
                    result = future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "GROUP_ID_NOT_FOUND"):
                        continue
                    raise
                out[name] = [
                    (tp.topic, tp.partition, int(tp.offset))
                    for tp in result.topic_partitions
                    if tp.offset >= 0 and tp.error is None
                ]
            return out

        return self._spread(list(groups), "offsets of groups", timeout_s, fetch)

    def _direct_alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        """Commit ``offsets`` for ``group``; the broker refuses if the group has active members."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            group, [_RdTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        )

        def run(t: float) -> None:
            futures = self._client.alter_consumer_group_offsets([request], request_timeout=t)
            result = futures[group].result(timeout=t)
            for tp in result.topic_partitions:
                if tp.error is not None:
                    raise translate(tp.error, f"commit {group} {tp.topic}-{tp.partition}")

        self._call(f"alter offsets of group {group}", timeout_s, run)

    def _direct_alter_group_rows(
        self, rows: Mapping[str, list[tuple[str, int, int]]], timeout_s: float | None = None
    ) -> dict[str, str | None]:
        """Commit many groups' offsets, ``(topic, partition, offset)`` rows per group (one
        request per group, spread over clients in waves: ``_spread``); per group None, or why
        the broker refused it.  Other errors raise.

        Rows, not TopicPartition keys, because they cross to the isolated helper: 500,000 tuples
        pickle and unpickle in a tenth of the time 500,000 dataclass keys take - CPU the helper
        would otherwise take from the broker on a small machine."""
        pending = {
            group: ConsumerGroupTopicPartitions(group, [_RdTopicPartition(*row) for row in offsets])
            for group, offsets in rows.items()
            if offsets
        }
        if not pending:
            return {}

        def write(client: AdminClient, groups: list[str], t: float) -> dict[str, str | None]:
            return _alter(client, {g: pending[g] for g in groups}, t)

        return self._spread(sorted(pending), "alter offsets of groups", timeout_s, write)

    def _spread(
        self,
        keys: list[str],
        what: str,
        timeout_s: float | None,
        work: Callable[[AdminClient, list[str], float], dict[str, V]],
    ) -> dict[str, V]:
        """``work(client, some keys, timeout)`` for every key: one request per key, spread
        over several admin clients, each with at most ``_WAVE`` requests in flight.

        librdkafka takes one group per offsets request and one admin client works through its
        requests one at a time: several clients in parallel wrote 1,000 groups x 50 partitions
        in 6.5 s (one client), 1.8 s (4), 1.1 s (8) and 0.9 s (16) here, and 10,000 groups in
        13.6 s (4), 7.3 s (8), 3.5 s (16), 2.8 s (32) and 2.6 s (64), at the same CPU (2.2-2.4
        CPU-s on the client side).  Waves, because
        librdkafka 2.16 aborted the process (an ``rd_kafka_enq_once`` assertion) with 10,000
        offset fetches queued on one client.  A client per 25 keys: a handful of groups is one
        request each on this admin's own client, with no extra client to connect.
        """
        if not keys:
            return {}
        lanes = min(_PARALLEL_CLIENTS, -(-len(keys) // 25))
        clients = self._lane_clients(lanes)

        def lane(index: int) -> dict[str, V]:
            mine = keys[index::lanes]

            def run(t: float) -> dict[str, V]:
                out: dict[str, V] = {}
                for start in range(0, len(mine), _WAVE):
                    out.update(work(clients[index], mine[start : start + _WAVE], t))
                return out

            return self._call(what, timeout_s, run)

        if lanes == 1:
            return lane(0)
        out: dict[str, V] = {}
        with ThreadPoolExecutor(lanes, thread_name_prefix="group-requests") as pool:
            for part in pool.map(lane, range(lanes)):
                out.update(part)
        return out

    def _lane_clients(self, count: int) -> list[AdminClient]:
        """``count`` admin clients: this admin's own, then extra ones (kept for reuse)."""
        extra: list[AdminClient] = self.__dict__.setdefault("_extra_clients", [])
        while len(extra) < count - 1:
            extra.append(make_admin_client(self.endpoint, client_settings(self.endpoint)))
        return [self._client, *extra[: count - 1]]

    def _direct_delete_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> tuple[str, ...]:
        names = list(groups)
        if not names:
            return ()

        def run(t: float) -> tuple[str, ...]:
            busy: list[str] = []
            futures = self._client.delete_consumer_groups(names, request_timeout=t)
            for group, future in futures.items():
                try:
                    future.result(timeout=t)
                except KafkaException as err:
                    if is_code(err.args[0], "NON_EMPTY_GROUP"):
                        busy.append(group)
                    elif not is_code(err.args[0], "GROUP_ID_NOT_FOUND"):
                        raise
            return tuple(busy)

        return self._call("delete groups", timeout_s, run)

    # -- consumer-group requests, isolated ---------------------------------------------------

    def describe_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupState]:
        """State and member count of each group."""
        names = list(groups)
        if not self.isolate or not names:
            return self._direct_describe_groups(names, timeout_s)
        return dict(self._isolated("_direct_describe_groups", timeout_s, names))

    def group_offsets(self, group: str, timeout_s: float | None = None) -> GroupOffsets:
        """The committed offsets of ``group`` (partitions without a commit are left out)."""
        if not self.isolate:
            return self._direct_group_offsets(group, timeout_s)
        return self._isolated("_direct_group_offsets", timeout_s, group)  # type: ignore[no-any-return]

    def groups_offsets(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> dict[str, GroupOffsets]:
        """Committed offsets of many groups (groups gone meanwhile are left out)."""
        names = list(groups)
        if not self.isolate or not names:
            rows = self._direct_group_offset_rows(names, timeout_s)
        else:
            rows = self._isolated("_direct_group_offset_rows", timeout_s, names)
        return {
            group: GroupOffsets(group, {shared_partition(t, p): o for t, p, o in offsets})
            for group, offsets in rows.items()
        }

    def alter_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None
    ) -> None:
        """Commit ``offsets`` for ``group``; the broker refuses if the group has active members."""
        if not self.isolate or not offsets:
            self._direct_alter_group_offsets(group, offsets, timeout_s)
            return
        self._isolated("_direct_alter_group_offsets", timeout_s, group, dict(offsets))

    def alter_groups_offsets(
        self, requests: Mapping[str, Mapping[TopicPartition, int]], timeout_s: float | None = None
    ) -> dict[str, str | None]:
        """Commit many groups' offsets concurrently; per group None or why it was refused (a
        group with active members is refused by the broker)."""
        rows = _offset_rows(requests)
        if not self.isolate or not rows:
            return self._direct_alter_group_rows(rows, timeout_s)
        return dict(self._isolated("_direct_alter_group_rows", timeout_s, rows))

    def delete_groups(
        self, groups: Iterable[str], timeout_s: float | None = None
    ) -> tuple[str, ...]:
        """Delete ``groups`` (absent ones count as deleted); returns those the broker refused
        because they still have members - a member whose process died stays until its session
        times out."""
        names = list(groups)
        if not self.isolate or not names:
            return self._direct_delete_groups(names, timeout_s)
        return tuple(self._isolated("_direct_delete_groups", timeout_s, names))
