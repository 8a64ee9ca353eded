"""Alembic environment for drkit's state store.

drkit runs migrations programmatically (``drkit db upgrade``) and passes its engine in
``config.attributes["engine"]``; there is no alembic.ini.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext

from drkit.store.models import Base, UtcDateTime


def render_item(kind: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Render drkit's UtcDateTime as the plain SQL type it stores (migrations stay standalone)."""
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


config = context.config
engine = config.attributes["engine"]

with engine.begin() as connection:
    if connection.dialect.name == "postgresql":
        # Serialise concurrent `drkit db upgrade` / monitor start-ups (released at commit).
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(4242001)")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=render_item,
    )
    context.run_migrations()
