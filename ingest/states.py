"""Normalizing scheduler states and exit codes into the attempts contract."""

from __future__ import annotations

import polars as pl

SLURM_STATES = {
    "COMPLETED": "completed",
    "COMPLETING": "running",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_fail",
    "PREEMPTED": "preempted",
    "OUT_OF_MEMORY": "out_of_memory",
    "BOOT_FAIL": "boot_fail",
    "DEADLINE": "deadline",
    "RUNNING": "running",
    "PENDING": "running",
    "REQUEUED": "preempted",
    "REQUEUE_FED": "preempted",
    "REQUEUE_HOLD": "preempted",
    "RESIZING": "running",
    "SUSPENDED": "running",
    "REVOKED": "cancelled",
    "SPECIAL_EXIT": "failed",
    "STOPPED": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "CONFIGURING": "running",
    "RESV_DEL_HOLD": "running",
}
"""Slurm job states (``sacct --helpstate``) → normalized state. A requeued attempt ended
because the scheduler took it back, which is what ``preempted`` means for attribution."""

KUEUE_STATES = {
    "succeeded": "completed",
    "completed": "completed",
    "failed": "failed",
    "evicted": "preempted",
    "preempted": "preempted",
    "oomkilled": "out_of_memory",
    "deadlineexceeded": "deadline",
    "running": "running",
    "cancelled": "cancelled",
}


def normalize_state_expr(raw: pl.Expr) -> pl.Expr:
    """Vectorized: a raw state column (``CANCELLED by 1000``, ``FAILED``, ``Succeeded``…) →
    normalized state, or null when the value is not a known state."""
    head = raw.str.strip_chars().str.split(" ").list.first().str.to_uppercase()
    table = {**SLURM_STATES, **{k.upper(): v for k, v in KUEUE_STATES.items()}}
    return head.replace_strict(table, default=None, return_dtype=pl.String)


def split_exit_code_expr(raw: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Vectorized: Slurm's ``code:signal`` (or a bare code) → (exit_code, signal) int32."""
    parts = raw.cast(pl.String).str.strip_chars().str.split(":")
    code = parts.list.get(0, null_on_oob=True).cast(pl.Int32, strict=False)
    sig = parts.list.get(1, null_on_oob=True).cast(pl.Int32, strict=False)
    return code, sig
