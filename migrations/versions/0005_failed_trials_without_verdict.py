"""Failed trials carry no verdict: the episodes' grader and count columns become nullable, and the
rows of failed trials already stored lose the values their graders found on the partial trajectory (as
``task_results.csv`` leaves them empty since 0.6.0; ``raw_runs.jsonl`` keeps them).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BOOLEANS = (
    "end_state",
    "no_stale_action",
    "no_duplicate_action",
    "refresh_before_write",
    "authorized",
    "no_prohibited_action",
)
COUNTS = ("stale_action_count", "duplicate_action_count", "prohibited_action_count", "blocked_write_count")
"""The verdict columns that were NOT NULL (conflict_recovery already allowed null)."""
CLEARED = (*BOOLEANS, "conflict_recovery", *COUNTS)


def upgrade() -> None:
    with op.batch_alter_table("episodes") as batch:
        for name in BOOLEANS:
            batch.alter_column(name, existing_type=sa.Boolean(), nullable=True)
        for name in COUNTS:
            batch.alter_column(name, existing_type=sa.Integer(), nullable=True)
    episodes = sa.table("episodes", sa.column("failed", sa.Boolean()), *(sa.column(n) for n in CLEARED))
    op.execute(episodes.update().where(episodes.c.failed == sa.true()).values(dict.fromkeys(CLEARED)))


def downgrade() -> None:
    """Back to NOT NULL: a failed trial's cleared values come back as false and 0 (its graders' findings are in
    its run directory's raw_runs.jsonl)."""
    episodes = sa.table("episodes", *(sa.column(n) for n in (*BOOLEANS, *COUNTS)))
    for name in BOOLEANS:
        op.execute(episodes.update().where(episodes.c[name].is_(None)).values({name: sa.false()}))
    for name in COUNTS:
        op.execute(episodes.update().where(episodes.c[name].is_(None)).values({name: 0}))
    with op.batch_alter_table("episodes") as batch:
        for name in BOOLEANS:
            batch.alter_column(name, existing_type=sa.Boolean(), nullable=False)
        for name in COUNTS:
            batch.alter_column(name, existing_type=sa.Integer(), nullable=False)
