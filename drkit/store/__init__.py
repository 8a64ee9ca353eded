"""drkit's durable memory: SQLAlchemy 2.x models, engine set-up and Alembic migrations.

SQLite in the state directory is the embedded default; any SQLAlchemy URL (PostgreSQL in
production and CI) works via config ``state_store.url`` or ``$DRKIT_DB_URL``.
"""

from drkit.store.db import StateStore, database_url
from drkit.store.models import Base

__all__ = ["Base", "StateStore", "database_url"]
