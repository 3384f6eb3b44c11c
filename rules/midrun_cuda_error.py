"""CUDA's "unknown error" on one node's ranks, well into a run nothing else explains: that node's GPU.

``cudaErrorUnknown`` (``CUDA error: unknown error``, ``cuda.unknown_error`` in
``cuda_framework.yaml``) names no fault, and is ``context`` on its own: at start-up it is
as often a setup problem (a driver and container mismatch, ``nvidia_uvm`` not loaded) as a
bad GPU. A run that had been working for :data:`MIN_RUNNING` and then got it on the ranks of
one node only had its set-up right: the device those ranks drove stopped answering (a GPU
that fell off the bus or hung returns it to every call), and the others then waited for
them. Where the node's kernel log has the XID, that line is the root and this its
confirmation (``precedence.xid_over_cuda_error``); where it is missing, or printed nothing,
these reports are the only word of the fault.

So, in a failed attempt with no root candidate, the unknown errors its job output printed on
the ranks of one node, :data:`MIN_RUNNING` or more after the attempt started, become ``gpu``
root candidates on that node, marked :data:`~engine.rules.python_rules.UNDECIDED_PARAM`: an
inference from the job's own words, never ``definitive``. Reports from several nodes name
none (a shared cause: a driver update under the running job).

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import UNDECIDED_PARAM, at_rows, rooted_attempts, with_param, with_role

UNKNOWN_ERROR_EVENT = "cuda_unknown_error"
"""The event of CUDA's unknown error (``cuda_framework.yaml``)."""
CAUSES = (("gpu.cuda_unknown_error", "gpu", "root_candidate", UNKNOWN_ERROR_EVENT),)
"""The unknown errors promoted: the node's GPU, as a root candidate."""
MIN_RUNNING = timedelta(minutes=5)
"""How long after its start an attempt must have been running for an unknown error to be a
device that stopped answering, not a set-up that never worked."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the mid-run unknown errors of one node's ranks the root candidates of each failed
    attempt without one (see the module docstring)."""
    reports = (pl.col("event") == UNKNOWN_ERROR_EVENT) & (pl.col("role") == "context") \
        & (pl.col("source") == "app") & pl.col("node").is_not_null() & (pl.col("state") != "completed") \
        & (pl.col("ts") >= pl.col("start_ts") + MIN_RUNNING).fill_null(False)
    if not events.select(reports.any()).item():
        return events
    found = (
        events.with_row_index("_row").filter(reports).select("_row", "attempt_id", "node")
        .join(rooted_attempts(events), on="attempt_id", how="anti")
        .filter(pl.col("node").n_unique().over("attempt_id") == 1)
    )
    if found.is_empty():
        return events
    promoted = at_rows(events, found["_row"])
    return with_param(with_role(events, promoted, "root_candidate"), promoted, UNDECIDED_PARAM,
                      "the job's own unknown CUDA error on this node's ranks, mid-run")
