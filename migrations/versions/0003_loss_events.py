"""loss events

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 10:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "loss_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("flow", sa.String(length=300), nullable=False),
        sa.Column("topic", sa.String(length=300), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("first_offset", sa.BigInteger(), nullable=False),
        sa.Column("last_offset", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("topic_id", sa.String(length=64), nullable=True),
        sa.Column("detected_by", sa.String(length=128), nullable=False),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("flow", "topic", "partition", "first_offset"),
    )


def downgrade() -> None:
    op.drop_table("loss_events")
