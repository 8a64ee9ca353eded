"""flow keys: the per-flow secret that signs offset syncs and control directives

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 04:30:00

drkit's writers put an HMAC of each offset-sync and control-channel record in a header
(drkit/signing.py); readers with a store drop records whose MAC is missing or wrong.  The key
is created by whoever needs it first (drkit/store/flow_keys.py).  Records written before this
revision carry no MAC: running workers write fresh signed ones.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flow_keys",
        sa.Column("flow", sa.String(length=300), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("flow"),
    )


def downgrade() -> None:
    op.drop_table("flow_keys")
