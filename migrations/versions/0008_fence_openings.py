"""fence openings: a cluster an operator opened by hand stays open until the pointer moves

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 16:00:00

Fences are desired state now (drkit.failover.protections): every cluster that is a flow's source
and not the pointer's is fenced, and the reconciler puts back what is missing.  An operator who
opens one (``drkit fences lift --even-if-standby``: it is being rebuilt or retired) is recorded
here with the pointer's epoch; the opening lapses when the pointer next moves.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fence_openings",
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("pointer_epoch", sa.BigInteger(), nullable=False),
        sa.Column("topics", sa.JSON(), nullable=True),
        sa.Column("opened_by", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster"),
    )


def downgrade() -> None:
    op.drop_table("fence_openings")
