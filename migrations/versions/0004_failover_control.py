"""failover control plane: leases, flow control and acks, active pointer, fences

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 11:30:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _at(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        _at("acquired_at"),
        _at("expires_at"),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "flow_control",
        sa.Column("flow", sa.String(length=300), nullable=False),
        sa.Column("desired", sa.String(length=32), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        _at("updated_at"),
        sa.PrimaryKeyConstraint("flow"),
    )
    op.create_table(
        "flow_acks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("flow", sa.String(length=300), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        _at("at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("flow", "worker"),
    )
    op.create_table(
        "active_pointer",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        _at("updated_at"),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "fences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("topic", sa.String(length=300), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("reads_allowed", sa.Boolean(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        _at("updated_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cluster", "topic"),
    )


def downgrade() -> None:
    for table in ("fences", "active_pointer", "flow_acks", "flow_control", "leases"):
        op.drop_table(table)
