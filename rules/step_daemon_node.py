"""A step's container setup failing without a node is on the node whose task srun reports next.

slurmstepd runs on every node of a step, and what it prints on behalf of the step (pyxis
failing to import the container image: ``slurmstepd: error: pyxis: … tar: … Cannot
write: No space left on device``, the spank plugin stack failing) reaches the job's
output through srun with neither a task label nor a node: in a multi-node attempt the line
names no node. srun then reports the task the failing node ran as ended
(``srun: error: kite12: task 1: Exited with exit code 1``) before the other nodes' tasks,
which waited for it in their rendezvous and time out later. So an infrastructure root
candidate on such a line (:data:`STEP_SETUP`) without a node is that node's: the node of
the first task report after it in the same file, in the same attempt. It becomes a new
root on that node, and the line it rests on its confirmation.

Roots in the job's own domain (``workload``) and the scheduler's are left alone: they name
no node whichever node printed them. A one-node attempt's lines are on its node already
(:func:`ingest.files.land.tie_to_attempts`).

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import link_to_roots, new_events, origin_position

RULE_ID = "step_daemon_node"
TASK_REPORT = "scheduler.task_terminated"
"""srun's report of a task that ended badly, which names the task's node (``scheduler.yaml``)."""
NODELESS_DOMAINS = ("workload", "scheduler")
"""Domains whose roots name no node, whichever node printed them."""
STEP_SETUP = r"^slurmstepd(?:\[[0-9]+\])?: error: (?:pyxis|spank)"
"""slurmstepd's report of the step's container setup failing on its node (the pyxis
plugin, or the spank plugin stack that runs it). Only setup failures: the failing node's
task ends at once while the others wait, so srun reports it first. A step's OOM kill
(``Detected 1 oom_kill event``) comes at no such moment: the first task srun reports then
may be any node's."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Place each nodeless root of a step's setup on the node of the next task report (see
    the module docstring)."""
    roots = events.filter(
        (pl.col("role") == "root_candidate") & pl.col("node").is_null() & (pl.col("source") == "app")
        & ~pl.col("domain").is_in(NODELESS_DOMAINS) & pl.col("message").str.contains(STEP_SETUP)
    )
    if roots.is_empty():
        return events
    reports = events.filter(
        (pl.col("event") == TASK_REPORT) & pl.col("node").is_not_null() & pl.col("message").str.starts_with("srun: ")
    ).select("attempt_id", pl.col("node").alias("_node"), *origin_position()).rename({"_line": "_report_line"})
    placed = (
        roots.with_columns(*origin_position())
        .join(reports, on=["attempt_id", "_file"])
        .filter(pl.col("_report_line") > pl.col("_line"))
        .sort("attempt_id", "event_id", "_report_line")
        .unique(["attempt_id", "event_id"], keep="first", maintain_order=True)
    )
    if placed.is_empty():
        return events
    added = new_events(
        placed.with_columns(pl.col("_node").alias("node")).drop("event_id", "rule_id"), events, rule_id=RULE_ID,
        event=pl.col("event"), domain=pl.col("domain"), cause=pl.col("cause"), role="root_candidate",
        action=pl.col("action"),
    )
    links = placed.select("attempt_id", "event_id",
                          pl.concat_str([pl.lit(f"{RULE_ID}@"), pl.col("origin")]).alias("_root"))
    return pl.concat([link_to_roots(events, links, "confirmation"), added.select(events.columns)])
