"""An XID known only by its number is the GPU's fault of that code when the kernel's own line is missing.

dcgm-exporter publishes the last XID of each GPU (``DCGM_FI_DEV_XID_ERRORS``, a gauge whose
value is the code) and counts them (``DCGM_EXP_XID_ERRORS_COUNT``, the code in its ``xid``
label). Where the node's kernel log is landed, its ``NVRM: Xid`` line says more (the PCI
address, the process, the detail, and its role), so the metric beside the kernel XID of its
node within :data:`WINDOW` only repeats it: context. Where that log is missing (a node
whose logs are not shipped), the metric is the only word of the fault. It is then a root
candidate when the kernel rule's table (``gpu_xid.yaml`` beside this file, the one place
the XID catalog is kept) makes that code a root of the GPU, its memory or its NVLink, and
it takes that code's domain, cause and action: a metric-only XID 48 is the GPU memory's
uncorrectable ECC error, a 74 the NVLink's error. A code the table does not list is a new
catalog entry, a root as ``gpu.xid_reported``. The codes the table makes the job's own
(13, 31), cascades (43, 45) or context (63, 92, media engines) blame no GPU, and neither
does a gauge falling back to 0 (the exporter or the node restarted).

The Kubernetes device plugin's ``XidCriticalError`` (``k8s_device_plugin_xid``) is the
same kind of report: its code's root outcome is given to it the same way (the plugin
already skips the codes it does not take a GPU out of service for).

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import yaml

from engine.rules.model import ParamMap
from engine.rules.python_rules import param, with_role

METRIC_EVENT = "gpu_xid_metric"
"""The event of the metric XID rules (``metrics.yaml``)."""
GAUGE_RULE = "metric.gpu_xid_gauge"
"""The rule whose value is the XID code itself."""
PLUGIN_EVENT = "k8s_device_plugin_xid"
"""The device plugin's report of a GPU it took out of service for an XID (``gpu_health.yaml``)."""
KERNEL_RULE = "gpu_xid"
"""The kernel's ``NVRM: Xid`` rule (``gpu_xid.yaml``), whose table says what each code means."""
ROOT_DOMAINS = ("gpu", "gpu_memory", "nvlink")
"""The domains of the codes a GPU's own fault is reported with."""
WINDOW = timedelta(minutes=10)
"""How near a kernel XID of the node a metric XID is the same fault (a scrape interval and
the exporter's polling, with room for the node's clock)."""
CAUSE = "gpu.xid_reported"
"""The cause of a GPU's XID whose code the catalog does not list."""


def _kernel_table() -> dict[str, object]:
    """The kernel XID rule's code table, read from ``gpu_xid.yaml`` beside this file so the
    catalog is kept in one place."""
    rules = yaml.safe_load(Path(__file__).with_name("gpu_xid.yaml").read_text())["rules"]
    return ParamMap.model_validate(next(rule for rule in rules if rule.get("id") == KERNEL_RULE)["map"]).table


_TABLE = _kernel_table()
LISTED = tuple(sorted(int(code) for code in _TABLE))
"""Every XID code the catalog lists; any other is a new entry."""
ROOT_CODES = pl.DataFrame(
    [{"_code": int(code), "_domain": o.domain, "_cause": o.cause, "_action": o.action}
     for code, o in sorted(_TABLE.items(), key=lambda item: int(item[0]))
     if o.role == "root_candidate" and o.domain in ROOT_DOMAINS],
    schema={"_code": pl.Int64, "_domain": pl.String, "_cause": pl.String, "_action": pl.String},
)
"""Code, domain, cause and action of each XID the catalog makes a root of the GPU, its
memory or its NVLink."""
CAUSES = tuple(
    (cause, domain, "root_candidate", event)
    for event in (METRIC_EVENT, PLUGIN_EVENT)
    for cause, domain in [(CAUSE, "gpu"), *ROOT_CODES.select("_cause", "_domain").unique().sort("_cause").rows()]
)


def _with_meaning(events: pl.DataFrame, coded: pl.DataFrame) -> pl.DataFrame:
    """Give the rows of ``coded`` (``_row``, ``_code``) their code's domain, cause and action
    where the catalog makes it a root of the GPU; other rows keep theirs."""
    meaning = coded.join(ROOT_CODES, on="_code", how="inner").drop("_code")
    if meaning.is_empty():
        return events
    events = events.join(meaning, on="_row", how="left", maintain_order="left")
    return events.with_columns(
        pl.coalesce(f"_{name}", name).alias(name) for name in ("domain", "cause", "action")
    ).drop("_domain", "_cause", "_action")


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make metric XIDs context beside their node's kernel XID, and the GPU's own ones roots
    of their code's meaning where the kernel log has none; give the device plugin's XIDs
    their code's meaning (see the module docstring)."""
    metric = (pl.col("event") == METRIC_EVENT) & (pl.col("role") == "confirmation") & pl.col("caused_by").is_null()
    plugin = pl.col("event") == PLUGIN_EVENT
    if events.is_empty() or not events.select((metric | plugin).any()).item():
        return events
    events = events.with_row_index("_row")
    events = _with_meaning(
        events, events.filter(plugin).select("_row", param("xid").cast(pl.Int64, strict=False).alias("_code"))
    )
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
    own = alone.filter(
        pl.col("_code").is_in(ROOT_CODES["_code"].implode())
        | (pl.col("_code").is_not_null() & (pl.col("_code") != 0) & ~pl.col("_code").is_in(LISTED))
    ).select("_row", "_code")
    # Beside the kernel's line the metric only repeats it: context, whatever role the
    # line has (a confirmation of a line that is no root would be made a root again).
    events = with_role(events, metric, "context")
    rooted = pl.col("_row").is_in(own["_row"].implode())
    events = events.with_columns(pl.when(rooted).then(pl.lit(CAUSE)).otherwise(pl.col("cause")).alias("cause"))
    events = _with_meaning(events, own)
    return with_role(events, rooted, "root_candidate").drop("_row")
