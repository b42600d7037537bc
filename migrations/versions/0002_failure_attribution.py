"""Failure attribution on episodes (failure mode, indexed for the dashboard; cause chain) and the proxy's
time to first byte.

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-20
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes") as batch:
        batch.add_column(sa.Column("failure_mode", sa.String(64), nullable=True))
        batch.add_column(sa.Column("failure_cause", sa.JSON(), nullable=True))
        batch.create_index("ix_episodes_failure_mode", ["failure_mode"])
    with op.batch_alter_table("proxy_traces") as batch:
        batch.add_column(sa.Column("first_byte_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("proxy_traces") as batch:
        batch.drop_column("first_byte_s")
    with op.batch_alter_table("episodes") as batch:
        batch.drop_index("ix_episodes_failure_mode")
        batch.drop_column("failure_cause")
        batch.drop_column("failure_mode")
