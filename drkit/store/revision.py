"""Developer helper: autogenerate a new Alembic revision from the models.

Usage: ``python -m drkit.store.revision "message"``.  It migrates a scratch SQLite database to
the current head and diffs it against :mod:`drkit.store.models`; review the generated file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from alembic import command

from drkit.store.db import StateStore


def main(message: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        store = StateStore(f"sqlite:///{Path(scratch) / 'scratch.db'}")
        store.upgrade()
        config = store._alembic_config()
        command.revision(config, message=message, autogenerate=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "change")
