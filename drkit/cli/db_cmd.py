"""``drkit db``: migrate and inspect the state store."""

from __future__ import annotations

import click

from drkit.cli.context import (
    REVISION,
    AppContext,
    config_option,
    echo_document,
    output_option,
    pass_app,
)
from drkit.errors import ConfigError, Problem
from drkit.store.db import safe_url


@click.group("db")
def db() -> None:
    """Manage the SQL state store (SQLite by default, PostgreSQL via URL)."""


@db.command("upgrade")
@click.option(
    "--revision", default="head", show_default=True, type=REVISION, help="Target revision."
)
@config_option
@output_option
@pass_app
def upgrade(app: AppContext, config_file: str | None, revision: str, output: str) -> None:
    """Apply Alembic migrations to the state store."""
    from alembic.util import CommandError

    store = app.store(config_file)
    before = store.current_revision()
    try:
        store.upgrade(revision)
    except CommandError as err:  # alembic's: an unknown or unreachable revision
        why = str(err).strip().splitlines()[0] if str(err).strip() else "not a revision"
        head = store.head_revision()
        raise ConfigError([Problem("--revision", (
            f"{revision!r}: {why} (this drkit's migrations end at head {head}: give 'head' or "
            "one of its revisions); nothing was changed"
        ))]) from None  # fmt: skip
    now = store.current_revision()
    if output == "json":
        echo_document("db", {"store": safe_url(store.url), "revision": now,
                             "head": store.head_revision()})  # fmt: skip
        return
    if now == before and revision != "head":  # 'base', or one the store is at or past
        click.echo(f"{safe_url(store.url)}: at revision {now or 'none'}, nothing to apply: the "
                   f"store is at or past {revision!r} (db upgrade never goes back)")  # fmt: skip
        return
    click.echo(f"{safe_url(store.url)}: at revision {now or 'none'}")


@db.command("current")
@config_option
@output_option
@pass_app
def current(app: AppContext, config_file: str | None, output: str) -> None:
    """Show the state store's revision and whether it is up to date."""
    store = app.store(config_file)
    revision, head = store.current_revision(), store.head_revision()
    if output == "json":
        echo_document("db", {"store": safe_url(store.url), "revision": revision, "head": head})
        return
    if revision == head:
        note = "up to date"
    elif store.knows_revision(revision):
        note = f"behind head {head}: run 'drkit db upgrade'"
    else:
        note = f"written by a newer drkit: this one's migrations end at {head}"
    click.echo(f"{safe_url(store.url)}: revision {revision or 'none'} ({note})")


COMMANDS = [db]
