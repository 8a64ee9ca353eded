"""flow acks: the error a worker's flow ended on for good

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 14:30:00

A worker whose flow ends on an error it cannot ride out keeps its ack row with the error, so
`drkit flows list`, `drkit status` and the failover steps see that it does not run (before, the
row was dropped and the flow looked as if it had never had a worker).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flow_acks") as batch:
        batch.add_column(sa.Column("failure", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("flow_acks") as batch:
        batch.drop_column("failure")
