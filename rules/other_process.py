"""An XID of the job's own kind raised in a process the job's launcher never named is another job's.

XID 13, 31 and 43 (a graphics exception, an MMU fault, a channel stopped: ``gpu_xid.yaml``)
are the fault of the program running on the GPU, and the driver names that process
(``pid=1733201, name=python``). On a node shared between jobs, each on its own GPUs, a
neighbour's process faulting its GPU says nothing of this attempt. torchrun names the
processes it started on each node when it tears them down (``failed (exitcode: 1)
local_rank: 0 (pid: 1733022)``, ``Sending process 1733023 closing signal SIGTERM``:
``cuda_framework.yaml``); where it named any on the XID's node and the XID's process is none
of them, the XID is ``context`` for this attempt. Where the launcher named no process on
that node (another launcher, a job killed before its teardown), nothing is changed.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import at_rows, param, with_role

LAUNCHED = ("launcher.elastic_worker_failed", "launcher.sending_sigterm")
"""The rules of torchrun's lines naming a process it started (its ``pid``)."""
XID_RULE = "gpu_xid"


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the workload XIDs of processes the launcher did not start ``context``."""
    job_xid = (pl.col("rule_id") == XID_RULE) & (pl.col("domain") == "workload") & pl.col("node").is_not_null()
    launched = pl.col("rule_id").is_in(LAUNCHED) & pl.col("node").is_not_null()
    if not events.select(job_xid.any() & launched.any()).item():
        return events
    rows = events.with_row_index("_row")
    pids = rows.filter(launched).select("attempt_id", "node", param("pid").alias("_pid")).drop_nulls().unique()
    xids = rows.filter(job_xid).select("_row", "attempt_id", "node", param("pid").alias("_pid")).filter(
        pl.col("_pid").str.contains(r"^\d+$").fill_null(False))
    foreign = (
        xids.join(pids.select("attempt_id", "node").unique(), on=["attempt_id", "node"], how="semi")
        .join(pids, on=["attempt_id", "node", "_pid"], how="anti")
    )
    if foreign.is_empty():
        return events
    return with_role(events, at_rows(events, foreign["_row"]), "context")
