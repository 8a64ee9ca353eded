"""A PostgreSQL store that stops answering stops drkit in bounded time (issue 44, finding 12):
every connection carries a connect timeout, TCP keepalives, a TCP user timeout and a statement
timeout - main had none, so a store behind a packet-dropping link held a worker's or an
engine's call for the kernel's retransmission time (minutes), replication stalling with it."""

from __future__ import annotations

from sqlalchemy import text

from drkit.store import StateStore
from drkit.store.db import STATEMENT_TIMEOUT_S, postgresql_connect_args


def test_every_postgresql_connection_is_bounded_in_time() -> None:
    args = postgresql_connect_args()
    assert args["connect_timeout"] <= 10
    assert args["keepalives"] == 1
    assert args["keepalives_idle"] + args["keepalives_interval"] * args["keepalives_count"] <= 30
    assert 0 < args["tcp_user_timeout"] <= 30_000


def test_a_real_postgresql_session_carries_the_timeouts(pg_url: str) -> None:
    store = StateStore(pg_url)
    with store.session() as session:
        statement = session.execute(text("SHOW statement_timeout")).scalar_one()
        raw = session.connection().connection.dbapi_connection
        assert raw is not None
        used = raw.info.get_parameters()  # psycopg: the libpq parameters in use
    assert statement == ("1min" if STATEMENT_TIMEOUT_S == 60 else f"{STATEMENT_TIMEOUT_S}s")
    assert used["keepalives_idle"] == "10" and used["tcp_user_timeout"] == "20000"
    assert used["connect_timeout"] == "10"
    store.engine.dispose()
