"""A failed attempt whose job script exited with 124 ran out of its own ``timeout``.

A job script that wraps its step in coreutils' ``timeout`` (``timeout 5400 srun python
train.py``) without ``--verbose`` prints nothing when the duration runs out: ``timeout``
sends its command TERM, srun tears the step down (the step ``CANCELLED``, its tasks
``Terminated``), and ``timeout`` exits with 124, which the script passes on. sacct then
shows the job ``FAILED`` with exit code ``124:0`` (the torn-down step's ``0:15``, where the
connector reads the signal from the steps), and the output holds only the
cancellation's symptoms. ``timeout`` returns 124 for exactly that case, so an attempt that
ended so with no root candidate of its own gets one: ``workload.command_timeout``, the
job's own limit (:mod:`scheduler.yaml`'s ``scheduler.coreutils_timeout`` reads the
``--verbose`` form), resting on the scheduler's record. Nothing links to it, so the verdict
is ``probable``: a program may choose 124 for itself.

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.correlate import ATTEMPT_COLUMNS
from engine.rules.python_rules import new_events, rooted_attempts

RULE_ID = "script_timeout"
TIMEOUT_EXIT = 124
"""coreutils' ``timeout`` exit status when its command timed out."""
EVENT = CAUSE = "workload.command_timeout"
CAUSES = ((CAUSE, "workload", "root_candidate", EVENT),)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Give each failed attempt that exited with :data:`TIMEOUT_EXIT` and has no root
    candidate the script's timeout as its root (see the module docstring)."""
    timed_out = context.attempts.filter(
        (pl.col("state") == "failed") & (pl.col("exit_code") == TIMEOUT_EXIT)
    )
    if timed_out.is_empty():
        return events
    rows = timed_out.join(rooted_attempts(events), on="attempt_id", how="anti").select(
        *ATTEMPT_COLUMNS, pl.col("end_ts").alias("ts"), pl.coalesce("origin", "attempt_id").alias("origin"),
        pl.lit(None, dtype=pl.String).alias("node"), pl.lit("scheduler").alias("source"),
        pl.format("the job script exited with code {}: coreutils' timeout killed its command", pl.lit(TIMEOUT_EXIT))
        .alias("message"),
    )
    if rows.is_empty():
        return events
    added = new_events(rows, events, rule_id=RULE_ID, event=EVENT, domain="workload", cause=CAUSE,
                       role="root_candidate", action="increase_time_limit")
    return pl.concat([events, added])
