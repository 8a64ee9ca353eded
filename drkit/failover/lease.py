"""One failover at a time: a named lease with a fencing token in the state store.

Acquiring succeeds when the lease is free, expired, or already ours; every acquisition by a new
owner increments ``token``.  The holder renews before each step and checks that the token is
still its own - a holder whose lease expired and was taken over learns it there and stops
(:class:`LeaseLost`), so two engines never act at once even if one of them stalled.

Works on SQLite and PostgreSQL: taking an expired lease is one conditional UPDATE (compare and
swap), and a concurrent first insert fails on the primary key and is retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from drkit.errors import DrkitError
from drkit.store.db import StateStore
from drkit.store.models import Lease as LeaseRow

FAILOVER_LEASE = "failover"


class LeaseHeld(DrkitError):
    """Another run holds the lease."""

    exit_code = 5

    def __init__(self, owner: str, expires_at: datetime) -> None:
        self.owner, self.expires_at = owner, expires_at
        left = max(0.0, (expires_at - datetime.now(UTC)).total_seconds())
        super().__init__(
            f"another failover is in progress: the lease is held by {owner} for {left:.0f}s more"
        )


class LeaseLost(DrkitError):
    """This run's lease expired and another run took it: stop now, resume later."""

    exit_code = 5


@dataclass(frozen=True)
class Lease:
    name: str
    owner: str
    token: int
    expires_at: datetime


class LeaseRepository:
    def __init__(self, store: StateStore) -> None:
        self.store = store

    def acquire(self, owner: str, ttl_s: float, name: str = FAILOVER_LEASE) -> Lease:
        """Take (or renew) the lease for ``ttl_s``; LeaseHeld when someone else holds it.

        Compare-and-swap updates, so two engines racing for an expired lease cannot both win.
        """
        for _attempt in range(5):
            now = datetime.now(UTC)
            expires = now + timedelta(seconds=ttl_s)
            with self.store.session() as session:
                taken = session.execute(
                    update(LeaseRow)
                    .where(LeaseRow.name == name, LeaseRow.expires_at <= now)
                    .values(
                        owner=owner,
                        token=LeaseRow.token + 1,
                        acquired_at=now,
                        expires_at=expires,
                    )
                )
                if taken.rowcount == 0:  # type: ignore[attr-defined]
                    session.execute(
                        update(LeaseRow)
                        .where(LeaseRow.name == name, LeaseRow.owner == owner)
                        .values(expires_at=expires)
                    )
            current = self.current(name)
            if current is None:
                try:
                    with self.store.session() as session:
                        session.add(
                            LeaseRow(
                                name=name, owner=owner, token=1, acquired_at=now, expires_at=expires
                            )
                        )
                except IntegrityError:
                    continue  # a concurrent first insert won; look again
                continue
            if current.owner == owner:
                return current
            raise LeaseHeld(current.owner, current.expires_at)
        raise LeaseHeld("an unknown owner", datetime.now(UTC))

    def renew(self, lease: Lease, ttl_s: float) -> Lease:
        """Extend ``lease``; LeaseLost when its token is no longer the current one."""
        expires = datetime.now(UTC) + timedelta(seconds=ttl_s)
        with self.store.session() as session:
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
            raise LeaseLost(
                f"the failover lease was taken over (token {lease.token} is stale); "
                "this run stops here"
            )
        return Lease(lease.name, lease.owner, lease.token, expires)

    def release(self, lease: Lease) -> None:
        """Give the lease up (expire it now) if it is still ours."""
        with self.store.session() as session:
            row = session.get(LeaseRow, lease.name, with_for_update=True)
            if row is not None and row.token == lease.token and row.owner == lease.owner:
                row.expires_at = datetime.now(UTC)

    def current(self, name: str = FAILOVER_LEASE) -> Lease | None:
        with self.store.session() as session:
            row = session.get(LeaseRow, name)
            if row is None:
                return None
            return Lease(row.name, row.owner, row.token, row.expires_at)
