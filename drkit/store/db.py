"""Engine set-up, URL resolution and Alembic migrations for the state store."""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from drkit import __version__, json_codec
from drkit.config.model import DrkitConfig
from drkit.errors import (
    ConfigError,
    NotAStore,
    Problem,
    StateStoreError,
    StoreFromNewerDrkit,
    StoreUrlUnusable,
)
from drkit.private_files import create_private, open_private_append, tighten

if TYPE_CHECKING:
    from alembic.config import Config

DB_FILE_NAME = "drkit.db"


def database_url(config: DrkitConfig | None, state_dir: Path) -> str:
    """``$DRKIT_DB_URL`` > config ``state_store.url`` > ``sqlite:///<state_dir>/drkit.db``."""
    if env := os.environ.get("DRKIT_DB_URL"):
        return env
    if config is not None and config.state_store.url is not None:
        return config.state_store.url.get_secret_value()
    return default_database_url(state_dir)


def default_database_url(state_dir: Path) -> str:
    """The state dir's own SQLite store (drkit makes its directory)."""
    return f"sqlite:///{state_dir / DB_FILE_NAME}"


def refuse_missing_sqlite_directory(url: str) -> None:
    """Raise ConfigError when ``url`` - a store the operator named, not the state dir's
    default - is a SQLite file in a directory that does not exist.  Creating it would start a
    new, empty store where the path may be a typo: no pointer, no lease, no runs - so a second
    engine could fail over beside the first."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # StateStore says what is wrong with it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    directory = Path(str(parsed.database)).parent
    if not directory.is_dir():
        where = "$DRKIT_DB_URL" if os.environ.get("DRKIT_DB_URL") else "state_store.url"
        raise ConfigError([Problem(where, (
            f"the SQLite store's directory {directory} does not exist: drkit does not start a "
            "new, empty store where a path may be a typo (it would hold no pointer, lease or "
            "runs); create the directory, or fix the path - nothing was done"
        ))])  # fmt: skip


# Query parameters that carry a credential (libpq's ``password``, ``sslpassword``; tokens).
_SECRET_PARAMETER = re.compile(r"pass|secret|token", re.IGNORECASE)


def safe_url(url: str) -> str:
    """The URL with every credential masked - the password of its user part and any query
    parameter that carries one - for messages, logs and status pages."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return "<invalid database URL>"
    query = {k: "***" if _SECRET_PARAMETER.search(k) else v for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def shown_error(error: BaseException) -> str:
    """What may be shown of a failure (a status page, /healthz): SQLAlchemy's own text carries
    the SQL statement and its parameters - a flow's signing key among them - so of its errors
    only the driver's first line (PostgreSQL's DETAIL names the row's values); others as
    they are (drkit's messages mask the store's URL)."""
    if not isinstance(error, SQLAlchemyError):
        return str(error)
    original = getattr(error, "orig", None)
    if isinstance(original, BaseException):
        first = str(original).strip().splitlines()
        return f"{type(original).__name__}: {first[0] if first else ''}".rstrip(": ")
    return type(error).__name__


def _migrations_dir() -> Path:
    """Alembic scripts: packaged as drkit/_migrations in a wheel, migrations/ in a checkout."""
    packaged = Path(__file__).resolve().parent.parent / "_migrations"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if checkout.is_dir():
        return checkout
    raise StateStoreError("drkit's Alembic migrations are missing from this installation")


class StateStore:
    """Owns the engine and session factory for one database URL."""

    def __init__(self, url: str) -> None:
        try:
            parsed: URL = make_url(url)
        except ArgumentError:
            raise StoreUrlUnusable("the state-store URL is not a valid SQLAlchemy URL") from None
        self.url = url
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            directory = Path(parsed.database).parent
            if Path(parsed.database).exists():  # another file named by mistake: left as it is
                _refuse_other_files(Path(parsed.database))
            try:
                directory.mkdir(parents=True, exist_ok=True)
                create_private(Path(parsed.database))  # runs, fences, leases: owner only
                for suffix in _SQLITE_SIDE_FILES:  # made by an older drkit: maybe 0644
                    tighten(Path(parsed.database + suffix))
            except OSError as err:
                raise StateStoreError(
                    f"cannot create {parsed.database} for the SQLite store: {err.strerror}"
                ) from None
            _refuse_other_files(Path(parsed.database))
        kwargs: dict[str, object] = {
            "pool_pre_ping": True,
            # JSON columns hold a run's per-group rows: 500,000 moves at 10,000 groups.
            "json_serializer": json_codec.dumps,
            "json_deserializer": json_codec.loads,
        }
        if self.is_sqlite:
            kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
        elif parsed.get_backend_name() == "postgresql":
            kwargs["connect_args"] = postgresql_connect_args()
        try:
            self.engine: Engine = create_engine(url, **kwargs)
        except (ArgumentError, ImportError) as err:
            raise StoreUrlUnusable(f"cannot use state store {safe_url(url)}: {err}") from None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        elif parsed.get_backend_name() == "postgresql":
            event.listen(self.engine, "connect", _postgresql_settings)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # The database's "now" as drkit.store.clock reads it; None: the database's own clock.
        # Only the deterministic simulation sets it (its store runs on simulated time).
        self.now: Callable[[], datetime] | None = None

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        session = self._sessions()
        if self.now is not None:
            session.info["now"] = self.now
        try:
            yield session
            session.commit()
        except OperationalError as err:
            session.rollback()
            raise StateStoreError(f"state store {safe_url(self.url)} failed: {err.orig}") from None
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    # -- migrations -----------------------------------------------------------------------

    def _alembic_config(self) -> Config:
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(_migrations_dir()))
        config.attributes["engine"] = self.engine
        return config

    def upgrade(self, revision: str = "head") -> None:
        """Apply migrations up to ``revision``.

        Safe to call from several processes at once (monitors starting together): SQLite
        upgrades hold a file lock next to the database; PostgreSQL ones take an advisory lock
        in the migration transaction (migrations/env.py).  Whoever comes second finds the
        database already at head and does nothing.
        """
        from alembic import command

        try:
            with self._migration_lock():
                self._refuse_newer(self.current_revision())
                command.upgrade(self._alembic_config(), revision)
        except DatabaseError as err:  # unreachable, or a file that is not a database
            raise StateStoreError(
                f"cannot migrate state store {safe_url(self.url)}: {err.orig}"
            ) from None

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        database = make_url(self.url).database
        if not self.is_sqlite or not database or database == ":memory:":
            yield
            return
        lock_path = Path(database).with_name(Path(database).name + ".migrate.lock")
        try:
            handle = open_private_append(lock_path)
        except OSError as err:
            raise StateStoreError(
                f"cannot migrate state store {safe_url(self.url)}: its lock file {lock_path}: "
                f"{err.strerror}"
            ) from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def current_revision(self) -> str | None:
        """The revision the database is at, or None when it was never migrated."""
        from alembic.runtime.migration import MigrationContext

        try:
            with self.engine.connect() as connection:
                return MigrationContext.configure(connection).get_current_revision()
        except DatabaseError as err:  # unreachable, or a file that is not a database
            raise StateStoreError(
                f"cannot reach state store {safe_url(self.url)}: {err.orig}"
            ) from None

    def head_revision(self) -> str | None:
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(self._alembic_config()).get_current_head()

    def knows_revision(self, revision: str | None) -> bool:
        """Whether ``revision`` (None: an empty database) is one of drkit's migrations."""
        from alembic.script import ScriptDirectory
        from alembic.util import CommandError

        if revision is None:
            return True
        try:
            found = ScriptDirectory.from_config(self._alembic_config()).get_revision(revision)
        except CommandError:
            return False
        return found is not None

    def _refuse_newer(self, current: str | None) -> None:
        """Raise StoreFromNewerDrkit when ``current`` is no migration of this drkit's."""
        if not self.knows_revision(current):
            raise StoreFromNewerDrkit(
                f"state store {safe_url(self.url)} is at revision {current}, which this drkit "
                f"({__version__}, migrations up to {self.head_revision()}) does not have: a "
                "newer drkit wrote it - run that version (or a newer one); nothing was changed"
            )

    def require_current(self) -> None:
        """Raise StateStoreError unless the database is migrated to head (StoreFromNewerDrkit
        when it is past it)."""
        current, head = self.current_revision(), self.head_revision()
        if current != head:
            self._refuse_newer(current)
            raise StateStoreError(
                f"state store {safe_url(self.url)} is at revision {current or 'none'}, "
                f"drkit needs {head}: run 'drkit db upgrade'"
            )

    def ensure_current(self) -> None:
        """Migrate to head if needed (used by long-running commands on the embedded default)."""
        try:
            current = self.current_revision()  # no lock to read: a read-only store serves
            if current == self.head_revision():
                return
            self._refuse_newer(current)  # only a store not at head can be a newer drkit's
            with self._migration_lock():
                behind = self.current_revision() != self.head_revision()
            if behind:
                self.upgrade()
        except SQLAlchemyError as err:
            raise StateStoreError(f"state store {safe_url(self.url)}: {err}") from None

    def table_names(self) -> list[str]:
        return sorted(inspect(self.engine).get_table_names())


# The first 16 bytes of every SQLite database file (an empty file is a new database).
_SQLITE_HEADER = b"SQLite format 3\x00"


# Beside an SQLite store: its journals (SQLite gives them the store's mode when it makes them)
# and drkit's migration lock.
_SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm", ".migrate.lock")


def _refuse_other_files(path: Path) -> None:
    """NotAStore when ``path`` holds something else than an SQLite database (a text file named
    as the store by mistake) - SQLite would only say so at the first query, as a failure."""
    if path.exists() and not path.is_file():  # /dev/null, a FIFO (opening it blocks), a dir
        raise NotAStore(
            f"{path} is not a drkit store: not a regular file - name the store's file "
            "(--state-dir, state_store.url); nothing was changed"
        )
    try:
        with path.open("rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise StateStoreError(f"cannot read the SQLite store {path}: {err.strerror}") from None
    if head and head != _SQLITE_HEADER:
        raise NotAStore(
            f"{path} is not a drkit store: the file is not a database (SQLite) - name the "
            "store's file (--state-dir, state_store.url) or move this one away; nothing was "
            "changed"
        )


def _sqlite_pragmas(connection: object, _record: object) -> None:
    cursor = connection.cursor()  # type: ignore[attr-defined]
    # Wait for other processes' locks first (switching to WAL itself needs one); WAL then lets
    # the monitor, workers and CLI read while one writes; FKs are off by default.
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# drkit's transactions are short (no Kafka call inside one).  A process frozen inside one (a
# SIGSTOP, a VM stall) would hold its row locks - the failover lease's among them - until it
# wakes: the server ends such a transaction after this long, so a takeover waits at most that.
IDLE_TRANSACTION_TIMEOUT_S = 20


# No statement of drkit's takes long (the largest writes a run's plan: seconds at 10,000
# groups); one that does is waiting on a lock or a dead link - fail it, the caller retries.
STATEMENT_TIMEOUT_S = 60


def postgresql_connect_args() -> dict[str, int]:
    """libpq's bounds on a link that stops answering without closing (a packet-dropping
    partition): connecting takes at most 10 s; an idle connection is probed after 10 s and
    given up after three unanswered 5 s probes; data unacknowledged for 20 s ends the
    connection (``tcp_user_timeout``) - the kernel's own retransmission gives up only after
    minutes.  The caller then sees an error it reports, retries or fails over on."""
    return {
        "connect_timeout": 10,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 20_000,
    }


def _postgresql_settings(connection: object, _record: object) -> None:
    cursor = connection.cursor()  # type: ignore[attr-defined]
    cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_TRANSACTION_TIMEOUT_S * 1000}")
    cursor.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_S * 1000}")
    cursor.close()
    connection.commit()  # type: ignore[attr-defined]
