"""A GPU that fell off the bus, or never came up, stays gone until its node is rebooted.

XID 79 ("GPU has fallen off the bus") takes a GPU away from the node's PCIe tree; only a
reset or a reboot brings it back. A GPU the driver could not initialise at boot
(``RmInitAdapter failed``) is missing the same way. A node left in service after one
hands the next jobs one GPU fewer, and the rank given that GPU fails at start with
``invalid device ordinal`` (``cuda.invalid_device``, a workload root on its own: usually
the job's own mistake). When
that rank's node lost a GPU within :data:`GONE_FOR` before the error and has not booted
since (``host.node_boot``), the lost GPU is the root: it is added to the attempt as a ``gpu``
root candidate (a copy of the fall-off event, at its own time, before the attempt started)
and the ``invalid device ordinal`` becomes its confirmation.

The fall-off and boot events are looked up among the attempt's own events and the lake's
past events (``context.history``): the fall-off usually happened during an earlier job,
outside this attempt's window. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import BOOT_EVENT, known_events, link_to_roots, new_events, not_rebooted

RULE_ID = "lost_gpu"
SYMPTOM = "cuda.invalid_device"
FELL_OFF = ("xid_79_fallen_off_bus", "gpu_fallen_off_bus")
"""Events of a GPU leaving the bus (``gpu_xid.yaml``, ``gpu_health.yaml``)."""
NOT_INITIALISED = "gpu_init_failed"
"""The driver's report of a GPU it could not initialise (``gpu_health.yaml``)."""
LOST = (*FELL_OFF, NOT_INITIALISED)
CAUSES = (*(("gpu.fallen_off_bus", "gpu", "root_candidate", event) for event in FELL_OFF),
          ("gpu.init_failure", "gpu", "root_candidate", NOT_INITIALISED))
"""The loss, copied into the attempt whose rank could not open the GPU, with its cause."""
GONE_FOR = timedelta(days=1)
"""How long before the error a fall-off still counts (when no boot is seen in between)."""
HISTORY_EVENTS = (*LOST, BOOT_EVENT)
"""The losses and boots looked up in past events (``context.history``)."""

NODE_EVENT_COLUMNS = ["cluster", "node", "ts", "event", "gpu", "origin", "message", "source", "ts_source", "params"]
"""What a fall-off carries over to the root it becomes."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make a node's earlier GPU fall-off the root of an ``invalid device ordinal`` on it
    (see the module docstring)."""
    symptoms = events.filter((pl.col("event") == SYMPTOM) & pl.col("node").is_not_null())
    if symptoms.is_empty():
        return events
    lost = known_events(events, context, LOST, NODE_EVENT_COLUMNS)
    if lost.is_empty():
        return events
    first = symptoms.sort("attempt_id", "ts", "event_id").group_by("attempt_id", maintain_order=True).first()
    pairs = (
        first.select(
            "attempt_id", "cluster", "node", "job_id", "user", "state", "start_ts", "end_ts",
            pl.col("ts").alias("_seen"), pl.col("event_id").alias("_symptom"),
        )
        .join(lost, on=["cluster", "node"])
        .filter((pl.col("ts") <= pl.col("_seen")) & (pl.col("ts") >= pl.col("_seen") - GONE_FOR))
    )
    # A boot between the fall-off and the error brought the GPU back (or proved it gone for good).
    found = (
        not_rebooted(pairs, events, context, since=pl.col("ts"), until=pl.col("_seen"))
        .sort("attempt_id", "ts", "origin", descending=[False, True, False])
        .group_by("attempt_id", maintain_order=True)
        .first()
    )
    if found.is_empty():
        return events
    added = new_events(
        found.with_columns(
            (pl.col("message") + pl.lit(" (still gone: no boot since; this attempt's rank could not open it)")).alias("message"),
        ),
        events, rule_id=RULE_ID, event=pl.col("event"), domain="gpu",
        cause=pl.col("event").replace_strict({event: cause for cause, _, _, event in CAUSES}),
        role="root_candidate", action="drain_node_and_restart",
    )
    # The added events keep the order of ``found``: each links its attempt's symptom.
    link = found.select("attempt_id", pl.col("_symptom").alias("event_id"), added["event_id"].alias("_root"))
    return pl.concat([link_to_roots(events, link, "confirmation"), added])
