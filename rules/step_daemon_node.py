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

Every node's slurmstepd prints its own copy. Where srun reports every node's tasks as
exited of their own (``Exited with exit code``: none was terminated for another's failure)
and the report was printed at least once per node (repeats fold into one event whose
``count`` says how many), every node failed the setup: the root is placed on each of
them, so that a failure every node had alike reads as one (the job's image needing a
newer driver than the fleet's, ``job_setup.py``) rather than as the fault of whichever
node srun reported first.

Roots in the job's own domain (``workload``) and the scheduler's are left alone: they name
no node whichever node printed them. A one-node attempt's lines are on its node already
(:func:`ingest.files.land.tie_to_attempts`).

Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import link_to_roots, new_events, origin_position, param

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
    """Place each nodeless root of a step's setup on the node of the next task report, or
    on every node where every node failed the setup (see the module docstring)."""
    roots = events.filter(
        (pl.col("role") == "root_candidate") & pl.col("node").is_null() & (pl.col("source") == "app")
        & ~pl.col("domain").is_in(NODELESS_DOMAINS) & pl.col("message").str.contains(STEP_SETUP)
    )
    if roots.is_empty():
        return events
    reports = events.filter(
        (pl.col("event") == TASK_REPORT) & pl.col("node").is_not_null() & pl.col("message").str.starts_with("srun: ")
    ).select(
        "attempt_id", pl.col("node").alias("_node"), *origin_position(),
        param("outcome").str.starts_with("Exited").fill_null(False).alias("_exited"),
    ).rename({"_line": "_report_line"})
    # Attempts whose every node srun reported exited of its own.
    all_exited = (
        reports.group_by("attempt_id", "_file").agg(pl.col("_node").filter("_exited").n_unique().alias("_exited_nodes"),
                                                    pl.col("_exited").all().alias("_all_exited"))
        .join(context.attempts.select("attempt_id", pl.col("nodes").list.unique().list.len().alias("_nodes")),
              on="attempt_id")
        .filter(pl.col("_all_exited") & (pl.col("_exited_nodes") == pl.col("_nodes")))
        .select("attempt_id", "_file", "_nodes")
    )
    candidates = (
        roots.with_columns(*origin_position())
        .join(all_exited, on=["attempt_id", "_file"], how="left")
        .with_columns((pl.col("count") >= pl.col("_nodes")).fill_null(False).alias("_every_node"))
        .join(reports.drop("_exited"), on=["attempt_id", "_file"])
    )
    first_after = (
        candidates.filter(~pl.col("_every_node") & (pl.col("_report_line") > pl.col("_line")))
        .sort("attempt_id", "event_id", "_report_line")
        .unique(["attempt_id", "event_id"], keep="first", maintain_order=True)
    )
    every_reported = (
        candidates.filter(pl.col("_every_node"))
        .sort("attempt_id", "event_id", "_report_line")
        .unique(["attempt_id", "event_id", "_node"], keep="first", maintain_order=True)
    )
    placed = pl.concat([first_after, every_reported])
    if placed.is_empty():
        return events
    added = new_events(
        placed.with_columns(pl.col("_node").alias("node")).drop("event_id", "rule_id", "_nodes", "_every_node"),
        events, rule_id=RULE_ID, event=pl.col("event"), domain=pl.col("domain"), cause=pl.col("cause"),
        role="root_candidate", action=pl.col("action"),
    )
    # One line's copies placed on several nodes: each node's root an id of its own.
    added = added.with_columns(
        pl.when(pl.Series(placed["_every_node"]))
        .then(pl.concat_str([pl.col("event_id"), pl.lit("#"), pl.col("node")]))
        .otherwise(pl.col("event_id")).alias("event_id")
    )
    links = placed.with_columns(pl.Series("_root", added["event_id"])).select("attempt_id", "event_id", "_root").unique(
        ["attempt_id", "event_id"], keep="first", maintain_order=True)
    return pl.concat([link_to_roots(events, links, "confirmation"), added.select(events.columns)])
