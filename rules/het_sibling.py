"""A heterogeneous job's component that saw only symptoms failed of its sibling's root.

Slurm runs the components of a heterogeneous job (sacct's ``1234+0``, ``1234+1``) as one
job: one MPI world or NCCL communicator spans them, so a GPU that falls off the bus on a
node of one component times out the collectives of the others. A node's lines attach only
to the attempts that ran on that node, so the other components see the timeouts and no
root. A failed component with no root candidate of its own gets, as its root, a copy of the
earliest root candidate of its siblings (at that line, naming its node, GPU and port, with
its outcome). Its symptoms stay unlinked: only the sibling relation ties them to that
root, so the verdict is never ``definitive``.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.correlate import ATTEMPT_COLUMNS
from engine.rules.python_rules import new_events, rooted_attempts
from ingest.schema import het_leader

RULE_ID = "het_sibling"
COPIES_OUTCOMES = True
"""A copy names nodes as the sibling's root does (:mod:`engine.rules.python_rules`)."""
COPIED = ["ts", "node", "gpu", "port", "rank", "params", "origin", "source", "ts_source"]
"""What the copy keeps of the sibling's root: where and when it happened, the line it rests on."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Give each failed heterogeneous job component without a root candidate a copy of its
    siblings' earliest root candidate (see the module docstring)."""
    components = context.attempts.select(*ATTEMPT_COLUMNS, het_leader(pl.col("job_id")).alias("_leader")).filter(
        pl.col("_leader") != pl.col("job_id"))
    if components.is_empty():
        return events
    orphans = components.filter(pl.col("state") != "completed").join(rooted_attempts(events), on="attempt_id",
                                                                       how="anti")
    roots = (
        events.filter(pl.col("role") == "root_candidate")
        .join(components.select("attempt_id", "cluster", "_leader", pl.col("job_id").alias("_sibling")),
              on=["attempt_id", "cluster"])
        .select("cluster", "_leader", "_sibling", "event_id", *COPIED, "message",
                *(pl.col(c).alias(f"_{c}") for c in ("event", "domain", "cause", "action")))
    )
    copies = (
        orphans.join(roots, on=["cluster", "_leader"])
        .sort("attempt_id", "ts", "_sibling", "event_id")
        .group_by("attempt_id", maintain_order=True).first()
        .with_columns(pl.concat_str([
            pl.lit("the job's component "), pl.col("_sibling"), pl.lit(" failed first: "), pl.col("message"),
        ]).alias("message"))
    )
    if copies.is_empty():
        return events
    added = new_events(
        copies.select(*ATTEMPT_COLUMNS, *COPIED, "message", "_event", "_domain", "_cause", "_action"), events,
        rule_id=RULE_ID, event=pl.col("_event"), domain=pl.col("_domain"), cause=pl.col("_cause"),
        role="root_candidate", action=pl.col("_action"),
    )
    return pl.concat([events, added])
