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


STATE_DETAIL = {
    "running": 0,
    "completed": 1, "failed": 1, "preempted": 1,
    "cancelled": 2, "timeout": 2, "deadline": 2, "node_fail": 2, "out_of_memory": 2, "boot_fail": 2,
}
"""How much a state says about why an attempt ended: not ended yet (0); the scheduler's
bare outcome (1); the outcome with its reason (2). A snapshot scheduler (Kueue) sees an
attempt's pods only while they exist, so a later snapshot may know less than an earlier one."""


def merge_attempts(new: pl.DataFrame, stored: pl.DataFrame) -> pl.DataFrame:
    """Attempt rows landed again over the stored rows of the same ``attempt_id``.

    A later report of an attempt updates it but never erases what an earlier report knew and
    it no longer sees (a Kueue snapshot taken after the pods were deleted has no nodes, end or
    exit code): a null value keeps the stored one, the node list is the union of both (a
    snapshot after a lost node's pod was deleted lists only the survivors'), the earlier of
    two ends stands (a Kueue snapshot taken after a re-admission only bounds the eviction
    before it, which an earlier snapshot may have seen), and the state with more detail
    (:data:`STATE_DETAIL`) wins, with its ``raw_state``; at equal detail the new report wins.
    Merging a row with itself changes nothing, so landing stays idempotent.
    """
    if stored.is_empty():
        return new
    old = stored.select(new.columns).rename({c: f"{c}__old" for c in new.columns if c != "attempt_id"})
    both = new.join(old, on="attempt_id", how="left")
    detail = pl.col("state").replace_strict(STATE_DETAIL, default=1, return_dtype=pl.Int8)
    old_detail = pl.col("state__old").replace_strict(STATE_DETAIL, default=1, return_dtype=pl.Int8)
    keep_old_state = pl.col("state__old").is_not_null() & (old_detail > detail)
    empty = pl.lit([], dtype=pl.List(pl.String))
    paired = {"state", "raw_state", "nodes", "n_nodes", "end_ts"}
    return both.select(
        "attempt_id",
        *(pl.coalesce(c, f"{c}__old") for c in new.columns if c not in paired | {"attempt_id"}),
        state=pl.when(keep_old_state).then("state__old").otherwise("state"),
        raw_state=pl.when(keep_old_state).then("raw_state__old").otherwise("raw_state"),
        nodes=pl.when(pl.col("nodes").is_null() & pl.col("nodes__old").is_null()).then(pl.col("nodes"))
        .otherwise(pl.concat_list(pl.col("nodes__old").fill_null(empty), pl.col("nodes").fill_null(empty))
                   .list.unique(maintain_order=True)),
        n_nodes=pl.max_horizontal("n_nodes", "n_nodes__old"),
        end_ts=pl.min_horizontal("end_ts", "end_ts__old"),
    ).select(new.columns)
