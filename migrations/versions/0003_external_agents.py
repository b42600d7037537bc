"""External agents: a run group's temperature may be unknown (an agent over MCP brings its own model).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_groups") as batch:
        batch.alter_column("temperature", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    # an external agent's run group has no temperature: it cannot go back under NOT NULL
    op.execute("DELETE FROM run_groups WHERE temperature IS NULL")
    with op.batch_alter_table("run_groups") as batch:
        batch.alter_column("temperature", existing_type=sa.Float(), nullable=False)
