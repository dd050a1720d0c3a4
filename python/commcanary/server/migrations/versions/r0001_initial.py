"""The first schema: accounts, sessions, tokens, workloads, artifacts,
pushes and analyses.

Revision ID: r0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "r0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(200), nullable=False),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used", sa.Float, nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, index=True),
        sa.Column("address", sa.String(64), nullable=False, index=True),
        sa.Column("at", sa.Float, nullable=False, index=True),
    )
    op.create_table(
        "workloads",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column(
            "owner_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.UniqueConstraint("owner_id", "name"),
    )
    op.create_table(
        "shares",
        sa.Column(
            "workload_id", sa.Integer, sa.ForeignKey("workloads.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    )
    op.create_table(
        "artifacts",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("format", sa.String(64), nullable=False),
        sa.Column("facts", sa.Text, nullable=False),
        sa.Column("signed_by", sa.String(128), nullable=True),
        sa.Column("stored_at", sa.Float, nullable=False),
    )
    op.create_table(
        "pushes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "workload_id",
            sa.Integer,
            sa.ForeignKey("workloads.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("digest", sa.String(64), sa.ForeignKey("artifacts.digest"), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("branch", sa.String(255), nullable=True),
        sa.Column("commit", sa.String(64), nullable=True),
        sa.Column("pushed_by", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("pushed_at", sa.Float, nullable=False),
    )
    op.create_index("ix_pushes_workload_branch", "pushes", ["workload_id", "branch"])
    op.create_table(
        "analyses",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "workload_id",
            sa.Integer,
            sa.ForeignKey("workloads.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("analysis", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("evidence", sa.Text, nullable=False),
        sa.Column("progress", sa.String(255), nullable=False),
        sa.Column("result_push_id", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float, nullable=True),
        sa.Column("finished_at", sa.Float, nullable=True),
    )


def downgrade() -> None:
    for table in (
        "analyses",
        "pushes",
        "artifacts",
        "shares",
        "workloads",
        "login_failures",
        "api_tokens",
        "sessions",
        "users",
    ):
        op.drop_table(table)
