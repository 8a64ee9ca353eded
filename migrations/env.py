"""Alembic environment for drkit's state store.

drkit runs migrations programmatically (``drkit db upgrade``) and passes its engine in
``config.attributes["engine"]``; there is no alembic.ini.
"""

from __future__ import annotations

from alembic import context

from drkit.store.models import Base

config = context.config
engine = config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    context.run_migrations()
