"""One actor at a time: named leases with a fencing token, judged by the database's clock.

A lease row holds ``owner``, ``token`` and ``expires_at``.  Taking a lease that is free or
expired gives it to the new owner with ``token + 1``; renewing keeps the token.  What makes the
lease hold under the faults that split orchestrators' brains:

* **One clock decides expiry**: ``expires_at`` is written and compared with the database's time
  (drkit.store.clock), never a host's - a monitor whose clock runs 40 s ahead does not take over
  a live engine.
* **The holder knows how long it surely holds it**: :attr:`Lease.valid_until` is a deadline on
  the holder's monotonic clock, from the moment it *sent* its last successful renewal, minus a
  margin - earlier than any moment the database can call the lease expired.  Past it the holder
  acts only after a synchronous renewal (:meth:`LeaseKeeper.confirm`).
* **Every store write is fenced by the token**: :meth:`LeaseRepository.fenced` opens a
  transaction that first re-proves the token under the lease row's lock; a holder that was
  frozen past its lease and woke after another took over raises :class:`LeaseLost` there and
  writes nothing, whatever it was about to do (finish a step, fail, roll back).
* **The keeper never dies quietly**: any error renewing is logged and retried; the holder stops
  acting once its monotonic deadline passes without a renewal.

Owners are unique per process and per actor (:func:`unique_owner`), so two monitors on one host,
or a restarted process that got an old pid, are never "the same owner".

Works on SQLite and PostgreSQL: taking a lease is a conditional UPDATE (compare and swap); a
concurrent first insert fails on the primary key and is retried.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from drkit import clock as drkit_clock
from drkit.clock import Budget
from drkit.errors import DrkitError, ExitCode, LeaseLost
from drkit.store.clock import database_now
from drkit.store.db import StateStore
from drkit.store.models import LeaseRow

log = logging.getLogger(__name__)

FAILOVER_LEASE = "failover"


def unique_owner(role: str) -> str:
    """``role:host:pid:nonce`` - never equal for two processes, nor for two actors of one."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


MAINTENANCE_TTL_S = 15.0  # the failover lease as the monitor's maintenance holds it (renewed)
MAINTENANCE_OWNER = "maintenance"  # the role in the lease owner's name (engines wait for it)


def ended_on_this_host(owner: str) -> bool:
    """Whether ``owner`` (``role:host:pid:nonce``, :func:`unique_owner`) is a process of this
    host that has ended - it can act no more, so its lease may be taken before it expires.  A
    pid reused since reads as alive: the lease is then waited out, never taken wrongly."""
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or parts[1] != socket.gethostname() or not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def maintenance_owner(observer: str) -> str:
    """The lease owner of the maintenance of the monitor ``observer`` (drkit.failover.
    maintenance): an owner engines wait for, not one they refuse."""
    return unique_owner(f"{MAINTENANCE_OWNER}:{observer}")


def is_maintenance(owner: str) -> bool:
    """Whether a lease owner is the monitor's maintenance (it holds the lease for seconds)."""
    return owner.startswith(f"{MAINTENANCE_OWNER}:")


def validity_margin(ttl_s: float) -> float:
    """How much earlier than the database the holder gives its own lease up: room for clock
    rate differences and scheduling, a tenth of the TTL."""
    return max(0.05, ttl_s / 10)


class LeaseHeld(DrkitError):
    """Another actor holds the lease."""

    exit_code = ExitCode.LEASE

    def __init__(self, owner: str, remaining_s: float, name: str = FAILOVER_LEASE) -> None:
        self.owner, self.remaining_s = owner, remaining_s
        what = "another failover is in progress: the lease" if name == FAILOVER_LEASE else name
        super().__init__(f"{what} is held by {owner} for {max(0.0, remaining_s):.0f}s more")


@dataclass(frozen=True)
class Lease:
    """A lease as its holder knows it.

    ``expires_at`` is on the database's clock; ``valid_until`` on the holder's monotonic clock
    (see the module docstring).  Invariant: ``valid_until`` is never later than the monotonic
    moment at which the database's clock reaches ``expires_at``.
    """

    name: str
    owner: str
    token: int
    expires_at: datetime
    valid_until: float

    def valid_for(self, now: float) -> float:
        """Seconds this holder surely still holds the lease (<= 0: no longer sure)."""
        return self.valid_until - now


def request_budget(
    confirmed: object, at_most: float | None, clock: Callable[[], float] = drkit_clock.monotonic
) -> float | None:
    """How long a side effect sent right after a confirmation may wait for its answer: what
    the ``confirmed`` lease surely has left (or a budget already worked out from it), capped by
    ``at_most`` (the caller's own timeout) - a request never waits past the lease that allowed
    it.  From a lease: a :class:`~drkit.clock.Budget`, which the cluster adapters check again
    right before they send (and before every retry).  Anything else: ``at_most``."""
    if isinstance(confirmed, Budget):
        return confirmed if at_most is None else Budget(min(confirmed, at_most),
                                                        confirmed.lease_until)  # fmt: skip
    if isinstance(confirmed, Lease):
        now = clock()
        left = confirmed.valid_for(now)
        if left <= 0:
            # The process stood still between the confirmation and now (frozen inside the
            # confirm, after its store write): the lease may be another's by now. A floor here
            # once turned a lapsed lease into a fresh 0.1 s budget (simulation seed 101167).
            raise LeaseLost(
                "the lease lapsed between its confirmation and this request (the process stood "
                "still): not sent"
            )
        # Remembers when the lease surely ends: a process that stood still (SIGSTOP, a paused
        # VM) between this confirmation and the request sends nothing past it.
        return Budget(left if at_most is None else min(left, at_most), now + left)
    if isinstance(confirmed, int | float) and not isinstance(confirmed, bool):
        left = max(0.1, float(confirmed))
        return left if at_most is None else min(left, at_most)
    return at_most


@dataclass(frozen=True)
class Holder:
    """Who holds a lease as the store says now (by the database's clock)."""

    name: str
    owner: str
    token: int
    expires_at: datetime
    remaining_s: float

    @property
    def expired(self) -> bool:
        return self.remaining_s <= 0


class LeaseRepository:
    def __init__(
        self, store: StateStore, clock: Callable[[], float] = drkit_clock.monotonic
    ) -> None:
        self.store = store
        self.clock = clock

    def acquire(self, owner: str, ttl_s: float, name: str = FAILOVER_LEASE) -> Lease:
        """Take (or renew) the lease for ``ttl_s``; LeaseHeld when someone else holds it.

        Compare-and-swap updates, so two actors racing for an expired lease cannot both win.
        """
        for _attempt in range(5):
            sent = self.clock()
            valid_until = sent + ttl_s - validity_margin(ttl_s)
            with self.store.session() as session:
                now = database_now(session)
                expires = now + timedelta(seconds=ttl_s)
                taken = session.execute(
                    update(LeaseRow)
                    .where(LeaseRow.name == name, LeaseRow.expires_at <= now)
                    .values(owner=owner, token=LeaseRow.token + 1, acquired_at=now,
                            expires_at=expires)
                )  # fmt: skip
                if taken.rowcount == 0:  # type: ignore[attr-defined]
                    session.execute(
                        update(LeaseRow)
                        .where(LeaseRow.name == name, LeaseRow.owner == owner)
                        .values(expires_at=expires)
                    )
                row = session.get(LeaseRow, name, populate_existing=True)
                found = (
                    None
                    if row is None
                    else (
                        row.owner,
                        row.token,
                        row.expires_at,
                        (row.expires_at - now).total_seconds(),
                    )
                )
            if found is None:
                # Never taken: insert it, then read it back (a concurrent first insert may
                # have won instead: the next round tells).
                self._insert(owner, name, ttl_s)
                continue
            holder, token, expires_at, remaining = found
            if holder == owner:
                return Lease(name, owner, token, expires_at, valid_until)
            raise LeaseHeld(holder, remaining, name)
        raise LeaseHeld("an unknown owner", 0.0, name)

    def _insert(self, owner: str, name: str, ttl_s: float) -> None:
        try:
            with self.store.session() as session:
                now = database_now(session)
                expires = now + timedelta(seconds=ttl_s)
                session.add(
                    LeaseRow(name=name, owner=owner, token=1, acquired_at=now, expires_at=expires)
                )
        except IntegrityError:
            pass  # another actor inserted it first

    def renew(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend ``lease``; LeaseLost when its token is no longer the current one."""
        sent = self.clock()
        with self.store.session() as session:
            now = database_now(session)
            expires = now + timedelta(seconds=ttl_s)
            renewed = session.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == lease.name,
                    LeaseRow.owner == lease.owner,
                    LeaseRow.token == lease.token,
                )
                .values(expires_at=expires)
            )
            if renewed.rowcount == 0:  # type: ignore[attr-defined]
                raise self._lost(session, lease)
        return replace(lease, expires_at=expires, valid_until=sent + ttl_s - validity_margin(ttl_s))

    def release(self, lease: Lease) -> None:
        """Give the lease up (expire it now) if it is still ours."""
        with self.store.session() as session:
            now = database_now(session)
            session.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == lease.name,
                    LeaseRow.owner == lease.owner,
                    LeaseRow.token == lease.token,
                )
                .values(expires_at=now)
            )

    def acquire_from_ended(self, owner: str, ttl_s: float, name: str = FAILOVER_LEASE) -> Lease:
        """:meth:`acquire`, but a lease whose holder :func:`ended_on_this_host` (a command
        killed while it held it) is taken at once instead of waited out; LeaseHeld otherwise."""
        try:
            return self.acquire(owner, ttl_s, name)
        except LeaseHeld as held:
            if not ended_on_this_host(held.owner) or not self.take_from(
                name, held.owner, owner, ttl_s
            ):
                raise
            log.info("took the lease %s from a process that ended", name, extra={"was": held.owner})
        return self.acquire(owner, ttl_s, name)

    def take_from(self, name: str, holder: str, owner: str, ttl_s: float) -> bool:
        """Give ``name`` to ``owner`` if ``holder`` still holds it (compare and swap), whatever
        its expiry: for a holder known to be gone (a process of this host that has ended)."""
        with self.store.session() as session:
            now = database_now(session)
            taken = session.execute(
                update(LeaseRow)
                .where(LeaseRow.name == name, LeaseRow.owner == holder)
                .values(owner=owner, token=LeaseRow.token + 1, acquired_at=now,
                        expires_at=now + timedelta(seconds=ttl_s))
            )  # fmt: skip
            return bool(taken.rowcount)  # type: ignore[attr-defined]

    def holder(self, name: str = FAILOVER_LEASE) -> Holder | None:
        """Who holds ``name`` now, judged by the database's clock (None: never taken)."""
        with self.store.session() as session:
            row = session.get(LeaseRow, name)
            if row is None:
                return None
            now = database_now(session)
            return Holder(
                row.name, row.owner, row.token, row.expires_at,
                (row.expires_at - now).total_seconds(),
            )  # fmt: skip

    @contextmanager
    def fenced(self, lease: Lease) -> Iterator[Session]:
        """A transaction that writes only while ``lease``'s token is current.

        Its first statement re-proves the token and locks the lease row (PostgreSQL: the row;
        SQLite: the database's write lock) until commit, so no takeover can interleave with the
        writes that follow.  LeaseLost (and nothing written) when another actor took over.
        """
        with self.store.session() as session:
            proven = session.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == lease.name,
                    LeaseRow.owner == lease.owner,
                    LeaseRow.token == lease.token,
                )
                .values(token=LeaseRow.token)
            )
            if proven.rowcount == 0:  # type: ignore[attr-defined]
                raise self._lost(session, lease)
            yield session

    @staticmethod
    def _lost(session: Session, lease: Lease) -> LeaseLost:
        row = session.get(LeaseRow, lease.name, populate_existing=True)
        now_held = (
            f"{row.owner} (token {row.token})" if row is not None else "nobody (the lease is gone)"
        )
        return LeaseLost(
            f"lease {lease.name!r} was taken over: token {lease.token} of {lease.owner} is stale, "
            f"the lease is now held by {now_held}"
        )


class LeaseKeeper:
    """Holds one lease for a long-running actor: renews it in the background every third of
    its TTL, and is the :class:`~drkit.store.guard.WriteGuard` of the actor's writes.

    * :meth:`session` - a store transaction fenced by the token (LeaseLost when taken over);
    * :meth:`confirm` - a synchronous renewal, called right before a side effect the store
      cannot fence (a Kafka ACL change, an offset commit): afterwards the actor surely holds
      the lease for almost a full TTL;
    * :meth:`check` - between steps: raises once the lease is lost, and confirms when the
      monotonic deadline has passed (a pause, a store that did not answer).

    The renewal thread survives any error (logged); it ends only when the lease is lost or
    :meth:`stop` is called.  ``on_renewed`` is told every renewal (e.g. to mirror it on a run).
    """

    def __init__(
        self,
        leases: LeaseRepository,
        lease: Lease,
        ttl_s: float,
        on_renewed: Callable[[Lease], None] | None = None,
    ) -> None:
        self.leases, self.ttl_s = leases, ttl_s
        self._lease = lease
        self._on_renewed = on_renewed
        self._lock = threading.Lock()
        self._lost: LeaseLost | None = None
        self._renewals: drkit_clock.Stoppable | None = None

    @property
    def lease(self) -> Lease:
        with self._lock:
            return self._lease

    @property
    def lost(self) -> LeaseLost | None:
        """Why the lease is known lost (a renewal or a fenced write found it taken), or None."""
        with self._lock:
            return self._lost

    def on_renewed(self, callback: Callable[[Lease], None]) -> None:
        """Tell ``callback`` every renewal from now on (it runs on the renewing thread)."""
        self._on_renewed = callback

    def start(self) -> LeaseKeeper:
        """Renew every third of the TTL in the background (drkit.clock: a thread, or the
        simulation's scheduler) until :meth:`stop` or the lease is lost."""
        self._renewals = drkit_clock.every(
            self.ttl_s / 3, self._renew_quietly, f"lease {self._lease.name}"
        )
        return self

    def stop(self) -> None:
        if self._renewals is not None:
            self._renewals.stop()

    def _renew_quietly(self) -> None:
        with self._lock:
            if self._lost is not None:
                return  # lost: nothing more to renew
        try:
            self._renew()
        except LeaseLost:
            if self._renewals is not None:
                self._renewals.stop()
        except Exception as err:  # the store away for a moment: try again, never die
            log.warning(
                "lease renewal failed",
                extra={"lease": self.lease.name, "error": f"{type(err).__name__}: {err}"},
            )

    def _renew(self) -> Lease:
        with self._lock:
            if self._lost is not None:
                raise self._lost
            current = self._lease
        try:
            renewed = self.leases.renew(current, self.ttl_s)
        except LeaseLost as lost:
            with self._lock:
                self._lost = lost
            raise
        with self._lock:
            self._lease = renewed
        if self._on_renewed is not None:
            try:
                self._on_renewed(renewed)
            except Exception as err:  # a mirror of the renewal, not the renewal: it stands
                log.warning(
                    "after a lease renewal, its listener failed",
                    extra={"lease": renewed.name, "error": f"{type(err).__name__}: {err}"},
                )
        return renewed

    def confirm(self) -> Lease:
        """Renew now; LeaseLost when the lease is gone or cannot be confirmed (store away)."""
        try:
            return self._renew()
        except LeaseLost:
            raise
        except Exception as err:  # the store away, or worse: not sure, so not acting
            raise LeaseLost(
                f"the lease {self.lease.name!r} could not be confirmed ({err}): stopping before "
                "any further change"
            ) from None

    def check(self) -> None:
        """LeaseLost once the lease is lost; a synchronous renewal when its deadline passed."""
        with self._lock:
            lost, lease = self._lost, self._lease
        if lost is not None:
            raise lost
        if lease.valid_for(self.leases.clock()) <= 0:
            self.confirm()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A store transaction fenced by this lease's token (see LeaseRepository.fenced)."""
        self.check()
        with self.leases.fenced(self.lease) as session:
            yield session
