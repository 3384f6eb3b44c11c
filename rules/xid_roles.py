"""XID roles that depend on more than one line: repeat offenders, NVLink5 severity, monitoring queries.

Three refinements of the events the ``gpu_xid`` rule (``gpu_xid.yaml``) extracts:

* XID 13 (graphics exception), 31 (MMU fault) and 43 (channel stopped) are normally the
  job's own fault. When the same physical GPU — (cluster, node, PCI address) — shows them in
  at least two different jobs, in this run or in ``context.history``, the GPU is the common
  factor: those events become ``gpu.repeated_xid`` root candidates with the action
  ``drain_node_and_restart``, marked :data:`~engine.rules.python_rules.UNDECIDED_PARAM`:
  the repeat is an inference (code both jobs share would fault the GPU alike), never
  ``definitive``.
* NVLink5 XIDs 144–150 carry a severity; the ``Nonfatal`` ones are corrected link events
  and become ``context``.
* XID 119 (a GSP RPC timed out) names the process whose call timed out. Raised in a
  monitoring query (:data:`MONITOR_PROCESSES`: ``name=nvidia-smi``) on a node where the
  job's own processes printed no GPU fault (no ``gpu``-domain line in its output from that
  node, none of :data:`~engine.rules.python_rules.GPU_FAULT_CAUSES`), while another node of
  the attempt has a root candidate, it is ``context``: a query that stalled, not what the
  job died of (the job's own processes on that GPU said nothing), and no rival to the fault
  the failure points at. Alone, or beside only the scheduler's end of the job (a time
  limit), it stays a root candidate: nothing else explains the hang.

XID 13/31/43 stamped before an attempt started belong to the job the GPU ran before:
``earlier_job.py`` makes them ``context`` for this attempt, after this rule.

Contract: :mod:`engine.rules.python_rules`. A node event is attached to every attempt that ran
on the node, so one XID can appear under two concurrent or consecutive jobs, each copy dated
by its own attempt's view of the node's clock. Jobs therefore count only by different lines
(the event's ``origin``): one line copied to two jobs is not a repeat. A job is its ``attempt_id`` without the trailing attempt number
(``slurm/<cluster>/<jobid>/<n>`` → ``slurm/<cluster>/<jobid>``): requeues of one job are one
job, and history rows (which carry no ``job_id``) are keyed the same way.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import GPU_FAULT_CAUSES, UNDECIDED_PARAM, at_rows, param, with_param, with_role

REPEATABLE_EVENTS = (
    "xid_13_graphics_exception",
    "xid_31_mmu_fault",
    "xid_43_channel_stopped",
)
"""Event names (from ``gpu_xid.yaml``) that point at the GPU when they repeat across jobs."""
HISTORY_EVENTS = REPEATABLE_EVENTS
"""Earlier jobs' repeatable XIDs count too (``context.history``)."""

NVLINK5_EVENT = "xid_{code}_nvlink5_error"
NVLINK5_EVENTS = tuple(NVLINK5_EVENT.format(code=code) for code in range(144, 151))

CAUSES = tuple(("gpu.repeated_xid", "gpu", "root_candidate", event) for event in REPEATABLE_EVENTS)
"""A repeatable XID on a GPU that showed it in :data:`MIN_JOBS` jobs is the GPU's fault."""

MIN_JOBS = 2
"""Different jobs that must show a repeatable XID on one GPU before the GPU is blamed."""

GSP_TIMEOUT_EVENT = "xid_119_gsp_rpc_timeout"
"""XID 119: a GSP RPC timed out, in the call of the process the line names (``gpu_xid.yaml``)."""
MONITOR_PROCESSES = ("nvidia-smi", "nv-hostengine", "dcgmi", "dcgm-exporter")
"""Processes that query GPUs for monitoring (the kernel prints at most 15 characters of a
process name): not the job's."""

GPU_KEY = ("cluster", "node", "gpu")
_NEEDED = (*GPU_KEY, "attempt_id", "event", "ts", "origin")


def _job_key() -> pl.Expr:
    return pl.col("attempt_id").str.replace(r"/\d+$", "")


def _repeatable(frame: pl.LazyFrame) -> pl.LazyFrame:
    """(GPU, job, line) of the repeatable XIDs in ``frame``: a line is its ``origin`` (its
    stamp where it has none)."""
    return (
        frame.filter(
            pl.col("event").is_in(REPEATABLE_EVENTS)
            & pl.col("gpu").is_not_null()
            & pl.col("attempt_id").is_not_null()
        )
        .select(*GPU_KEY, _job_key().alias("job"), pl.coalesce("origin", pl.col("ts").cast(pl.String)).alias("_line"))
        .unique()
    )


def repeat_offender_gpus(events: pl.DataFrame, history: pl.LazyFrame) -> pl.DataFrame:
    """GPUs (cluster, node, gpu) with repeatable XIDs in at least :data:`MIN_JOBS` jobs, each
    line counted for one job only (the first, by its id)."""
    parts = [_repeatable(events.lazy())]
    if set(_NEEDED) <= set(history.collect_schema().names()):
        parts.append(_repeatable(history.select(_NEEDED).cast(events.select(_NEEDED).schema)))
    per_line = (
        pl.concat(parts)
        .group_by(*GPU_KEY, "_line")
        .agg(pl.col("job").min())
    )
    return (
        per_line.group_by(GPU_KEY)
        .agg(pl.col("job").n_unique().alias("jobs"))
        .filter(pl.col("jobs") >= MIN_JOBS)
        .select(*GPU_KEY, pl.lit(True).alias("_repeat_offender"))
        .collect()
    )


def _monitor_queries_beside_roots(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with each monitoring query's GSP timeout (see the module docstring) made
    context where its node's job output printed no GPU fault and another node of its
    attempt has a root candidate."""
    query = (pl.col("event") == GSP_TIMEOUT_EVENT) & (pl.col("role") == "root_candidate") \
        & param("process").is_in(MONITOR_PROCESSES).fill_null(False)
    if not events.select(query.any()).item():
        return events
    key = ["attempt_id", "node"]
    said = events.filter(
        (pl.col("source") == "app") & ((pl.col("domain") == "gpu") | pl.col("cause").is_in(GPU_FAULT_CAUSES))
    ).select(key).unique()
    # The scheduler's banners (a time limit, a cancellation) stop a job; they explain no stall.
    roots = events.filter((pl.col("role") == "root_candidate") & pl.col("node").is_not_null() & ~query
                          & (pl.col("domain") != "scheduler")) \
        .select("attempt_id", pl.col("node").alias("_root_node")).unique()
    quiet = (
        events.with_row_index("_row").filter(query).select("_row", *key)
        .join(said, on=key, how="anti")
        .join(roots, on="attempt_id")
        .filter(pl.col("_root_node") != pl.col("node"))
    )
    return with_role(events, at_rows(events, quiet["_row"]), "context")


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Upgrade repeated XID 13/31/43 to GPU faults, demote Nonfatal NVLink5 XIDs and the
    GSP timeouts of monitoring queries beside another node's root."""
    events = _monitor_queries_beside_roots(events)
    repeatable = pl.col("event").is_in(REPEATABLE_EVENTS)
    nvlink5 = pl.col("event").is_in(NVLINK5_EVENTS)
    # Masks over narrow frames: few events are XIDs, and the events frame is wide.
    offenders = repeat_offender_gpus(events, context.history)
    upgrade = (
        events.select(*GPU_KEY, repeatable.alias("_repeatable"))
        .join(offenders, on=list(GPU_KEY), how="left", maintain_order="left")
        .select(pl.col("_repeatable") & pl.col("_repeat_offender").fill_null(False))
        .to_series()
        if not offenders.is_empty() else None
    )
    nonfatal = events.select(
        nvlink5 & pl.when(nvlink5).then(pl.col("params")).str.json_path_match("$.detail")
        .str.contains(r"\bNonfatal\b").fill_null(False)
    ).to_series() if events.select(nvlink5.any()).item() else None
    if upgrade is None and nonfatal is None:
        return events
    upgrade = pl.lit(upgrade if upgrade is not None else False)
    nonfatal = pl.lit(nonfatal if nonfatal is not None else False)
    events = events.with_columns(
        pl.when(upgrade).then(pl.lit("gpu")).otherwise(pl.col("domain")).alias("domain"),
        pl.when(upgrade).then(pl.lit("gpu.repeated_xid")).otherwise(pl.col("cause")).alias("cause"),
        pl.when(upgrade)
        .then(pl.lit("drain_node_and_restart"))
        .otherwise(pl.col("action"))
        .alias("action"),
        pl.when(upgrade)
        .then(pl.lit("root_candidate"))
        .when(nonfatal)
        .then(pl.lit("context"))
        .otherwise(pl.col("role"))
        .alias("role"),
    )
    # An inference from the repeat: code both jobs share would fault the GPU the same way,
    # so the verdict is never definitive.
    return with_param(events, upgrade, UNDECIDED_PARAM, "the same XID on this GPU in another job")
