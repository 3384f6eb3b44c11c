"""A GPU the driver says needs a reset or a reboot failed, whatever the XID before said.

Since R550 the driver prints XID 154 when the recovery a GPU needs changes (``GPU recovery
action changed from 0x0 (None) to 0x2 (Node Reboot Required)``). NVIDIA's memory error
management guide says the flag is raised for uncorrectable errors: a GPU that needs a
reset, a drain and reset or a node reboot cannot run work until it gets one. The XID it
follows is usually a root of its own (a fallen-off GPU, an uncontained ECC error), and the
154 only names what to do. But when the XID before it is one the catalog says to ignore (a
C2C link error, XID 121) or no XID at all, the 154 is the only line saying the GPU failed,
and the rank on that GPU dies of a bare ``unspecified launch failure``: read alone, the
job's own bug.

So an XID 154 asking for :data:`ESCALATED` recovery, with no other root candidate of the
GPU's domains on its node within :data:`SAME_FAULT` before it (a GPU off the bus makes the
driver ask every GPU of the node to wait for the reboot), becomes a ``gpu`` root
candidate (action by the recovery it asks for), and the attempt's CUDA errors on its node
within :data:`CONFIRMED_WITHIN` of it (:data:`CUDA_ERRORS`, the ones
``precedence.xid_over_cuda_error`` pairs with an XID) become its confirmations. A 154 back
to ``None`` (the GPU was reset) or asking only to drain P2P stays ``context``.

Declared in ``gpu_xid.yaml`` after ``xid_roles`` and before ``earlier_job``, which treats
the GPU fault it makes as any other (another job's on a shared node, or the previous
job's). Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.relabel import GPU_DOMAINS
from engine.rules.python_rules import link_to_roots, param, with_values

EVENT = "xid_154_recovery_action_changed"
"""The event of XID 154 (``gpu_xid.yaml``), its recovery in the ``recovery_action`` param."""
ESCALATED = {
    "GPU Reset Required": "reset_gpu_and_restart",
    "Drain and Reset": "drain_node_and_restart",
    "Node Reboot Required": "drain_node_and_restart",
}
"""The recoveries (as the driver names them) that leave the GPU unusable until done, and the
action each asks of an operator."""
CAUSE = "gpu.recovery_action_changed"
CAUSES = ((CAUSE, "gpu", "root_candidate", EVENT),)
SAME_FAULT = timedelta(minutes=1)
"""How long before the 154 another GPU root of its node is the fault it names the recovery of."""
CONFIRMED_WITHIN = timedelta(minutes=5)
"""How close to the 154 a CUDA error on its node is that fault seen by the process (the
window of ``precedence.xid_over_cuda_error``)."""
CUDA_ERRORS = (
    "workload.illegal_memory_access", "workload.launch_failure", "workload.kernel_exception",
    "workload.cublas_failure", "cuda_unknown_error", "cuda_uncorrectable_ecc", "cuda_device_unavailable",
)
"""The CUDA errors a failed GPU makes its processes raise (``cuda_framework.yaml``,
``gpu_health.yaml``)."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make each escalated XID 154 that follows no root of its GPU a root candidate, and the
    CUDA errors near it on its node its confirmations (see the module docstring)."""
    escalated = (pl.col("event") == EVENT) & param("recovery_action").is_in(list(ESCALATED)).fill_null(False)
    if not events.select(escalated.any()).item():
        return events
    keyed = events.with_row_index("_row")
    notices = keyed.filter(escalated & pl.col("attempt_id").is_not_null()).select(
        "_row", "attempt_id", "event_id", "node", "gpu", "ts", param("recovery_action").alias("_recovery"))
    # The driver asks every GPU of a node to wait for the reboot one GPU's fault needs.
    others = keyed.filter(
        (pl.col("role") == "root_candidate") & pl.col("domain").is_in(GPU_DOMAINS) & (pl.col("event") != EVENT)
    ).select("attempt_id", "node", pl.col("ts").alias("_other_ts"))
    followed = (
        notices.join(others, on=["attempt_id", "node"])
        .filter(pl.col("_other_ts").is_between(pl.col("ts") - SAME_FAULT, pl.col("ts")))
        .select("_row").unique()
    )
    roots = notices.join(followed, on="_row", how="anti")
    if roots.is_empty():
        return events
    promoted = keyed["_row"].is_in(roots["_row"].implode())
    action = keyed.join(roots.select("_row", "_recovery"), on="_row", how="left", maintain_order="left")[
        "_recovery"].replace_strict(ESCALATED, default=None)
    events = with_values(events, promoted, role="root_candidate", domain="gpu", cause=CAUSE)
    events = events.with_columns(pl.when(promoted).then(action).otherwise(pl.col("action")).alias("action"))
    confirming = (
        events.filter(pl.col("event").is_in(CUDA_ERRORS) & (pl.col("role") != "confirmation"))
        .select("attempt_id", "event_id", "node", pl.col("ts").alias("_error_ts"))
        .join(roots.select("attempt_id", "node", "ts", pl.col("event_id").alias("_root")), on=["attempt_id", "node"])
        .filter((pl.col("_error_ts") - pl.col("ts")).abs() <= CONFIRMED_WITHIN)
        .sort("attempt_id", "event_id", "ts")
        .unique(["attempt_id", "event_id"], keep="first", maintain_order=True)
    )
    return link_to_roots(events, confirming, "confirmation")
