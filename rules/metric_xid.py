"""An XID seen only in DCGM's metrics is the GPU's fault when the kernel's own line is missing.

dcgm-exporter publishes the last XID of each GPU (``DCGM_FI_DEV_XID_ERRORS``, a gauge whose
value is the code) and counts them (``DCGM_EXP_XID_ERRORS_COUNT``, the code in its ``xid``
label). Where the node's kernel log is landed, its ``NVRM: Xid`` line says more (the PCI
address, the process, the detail, and its role), so the metric beside the kernel XID of its
node within :data:`WINDOW` only repeats it: context. Where that log is missing (a node
whose logs are not shipped), the metric is the only word of the fault, and it is a root candidate
(``gpu.xid_reported``, on its node and GPU) unless its code is one a job's own code causes
or a report that ends nothing — the XIDs NVIDIA's Kubernetes device plugin does not take a
GPU out of service for (13, 31, 43, 45, 68, 109), and 63 (a row marked for remapping). A
gauge falling back to 0 (the exporter or the node restarted) is no XID at all: context.

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import with_role

METRIC_EVENT = "gpu_xid_metric"
"""The event of the metric XID rules (``metrics.yaml``)."""
GAUGE_RULE = "metric.gpu_xid_gauge"
"""The rule whose value is the XID code itself."""
KERNEL_RULE = "gpu_xid"
"""The kernel's ``NVRM: Xid`` rule (``gpu_xid.yaml``)."""
NOT_THE_GPUS = (13, 31, 43, 45, 68, 109, 63)
"""XIDs that do not say the GPU failed: the device plugin's skipped list (application
errors and their teardown) and 63 (a row marked for remapping)."""
WINDOW = timedelta(minutes=10)
"""How near a kernel XID of the node a metric XID is the same fault (a scrape interval and
the exporter's polling, with room for the node's clock)."""
CAUSE = "gpu.xid_reported"
"""The cause of a GPU's XID known only by its number (as the device plugin reports one)."""
CAUSES = ((CAUSE, "gpu", "root_candidate", METRIC_EVENT),)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make metric XIDs context beside their node's kernel XID, and the GPU's own ones roots
    where the kernel log has none (see the module docstring)."""
    metric = (pl.col("event") == METRIC_EVENT) & (pl.col("role") == "confirmation") & pl.col("caused_by").is_null()
    if events.is_empty() or not events.select(metric.any()).item():
        return events
    events = events.with_row_index("_row")
    labelled = pl.col("params").str.extract(r'\\"xid\\":\\"(\d+)\\"', 1).cast(pl.Int64, strict=False)
    gauge = pl.col("params").str.json_path_match("$.value").cast(pl.Float64, strict=False).cast(pl.Int64, strict=False)
    xids = events.filter(metric).select(
        "_row", "attempt_id", "node", "ts",
        pl.coalesce(labelled, pl.when(pl.col("rule_id") == GAUGE_RULE).then(gauge)).alias("_code"),
    )
    kernel = (
        events.filter((pl.col("rule_id") == KERNEL_RULE) & pl.col("attempt_id").is_not_null())
        .select("attempt_id", "node", pl.col("ts").alias("_kernel_ts"), pl.col("event_id").alias("_kernel"))
        .sort("_kernel_ts")
    )
    nearest = (
        xids.sort("ts")
        .join_asof(kernel, left_on="ts", right_on="_kernel_ts", by=["attempt_id", "node"], strategy="nearest",
                   tolerance=WINDOW, check_sortedness=False)
    )
    alone = nearest.filter(pl.col("_kernel").is_null())
    own = alone.filter(pl.col("_code").is_not_null() & (pl.col("_code") != 0) & ~pl.col("_code").is_in(NOT_THE_GPUS))
    # Beside the kernel's line the metric only repeats it: context, whatever role the
    # line has (a confirmation of a line that is no root would be made a root again).
    events = with_role(events, metric, "context")
    rooted = pl.col("_row").is_in(own["_row"].implode())
    events = events.with_columns(pl.when(rooted).then(pl.lit(CAUSE)).otherwise(pl.col("cause")).alias("cause"))
    return with_role(events, rooted, "root_candidate").drop("_row")
