"""failover runs: per-group rows (a plan's group moves, the translation) in their own table

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 10:40:00

Runs stored before keep their rows inline in their JSON (``plan.groups``, a step's
``detail.groups``) and are read as before; new runs mark the JSON with ``group_rows``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "failover_run_groups",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("part", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["failover_runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "part", "seq"),
    )


def downgrade() -> None:
    op.drop_table("failover_run_groups")
