"""A row the GPU marked for remapping seconds before a rank on its node found a NaN is a rival.

XID 63 (``Row Remapper: New row marked for remapping``) alone is background: the driver
contained the error and the row is swapped at the next reset (``gpu_xid.yaml`` makes it
``context``). But a rank on that node finding its loss or gradients NaN within
:data:`BEFORE_NAN` after it is the one case where a memory error and a divergence of the
job's own look alike: either the code diverged, or the failing row corrupted what the rank
computed, and no line tells which. A NaN the job printed unstamped may have come anywhere
in its span (from the stamp it inherited to the next stamped line, ``ts_hi``): a marking
within that span, or a minute before it, is beside it too. So the marking becomes a root
candidate and both it and the NaN are each other's rivals (:data:`~engine.rules.python_rules.RIVAL_PARAM`): the
verdict names the node and lists both, never ``definitive``. Uncorrectable errors (XID 48,
94, 95) outrank a NaN anywhere in the job outright (``precedence.memory_error_over_non_finite_loss``).

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import RIVAL_PARAM, at_rows, with_param, with_role

ROW_MARKED = "xid_63_row_remap_pending"
"""XID 63's event (``gpu_xid.yaml``)."""
NAN = "workload.non_finite_loss"
"""A loss or gradient that went NaN or infinite (``framework.non_finite_loss``)."""
BEFORE_NAN = timedelta(minutes=1)
"""How soon after the marking the rank must find the NaN: the corrupted values reach the
loss or the gradient norm within the step the error struck (seconds on a large model)."""
PRINTED_AFTER = timedelta(seconds=5)
"""How much later the marking may be stamped than the NaN (the driver's line and the rank's
check one instant apart, the kernel log buffered)."""

CAUSES = (("gpu_memory.row_remap_pending", "gpu_memory", "root_candidate", ROW_MARKED),)
"""A row marking the rule makes a rival of the NaN beside it."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make each row marking followed by a NaN on its node a root candidate, both rivals."""
    marked = (pl.col("event") == ROW_MARKED) & pl.col("node").is_not_null()
    nan = (pl.col("event") == NAN) & (pl.col("role") == "root_candidate") & pl.col("node").is_not_null()
    if not events.select(marked.any() & nan.any()).item():
        return events
    rows = events.with_row_index("_row")
    key = ["attempt_id", "node"]
    pairs = (
        rows.filter(marked).select("_row", *key, "ts")
        .join(rows.filter(nan).select(pl.col("_row").alias("_nan"), *key, pl.col("ts").alias("_nan_ts"),
                                      pl.col("ts_hi").alias("_nan_hi")), on=key)
        .filter(pl.col("ts").is_between(pl.col("_nan_ts") - BEFORE_NAN, pl.col("_nan_hi") + PRINTED_AFTER))
    )
    if pairs.is_empty():
        return events
    markings = at_rows(events, pairs["_row"])
    rivals = markings | at_rows(events, pairs["_nan"])
    events = with_role(events, markings, "root_candidate")
    return with_param(events, rivals, RIVAL_PARAM, "a GPU row marked for remapping and a NaN on its node")
