"""Faults a job recovered from by restarting inside its allocation are not what ended it.

torchelastic's agent (torchrun ``--max-restarts``, NVIDIA's ft_launcher, DLRover) restarts
the worker group after a failure and the job goes on in the same attempt: a link that
flapped at 01:12, a restart at 01:13 and two more hours of training before a GPU fell off
the bus at 03:47 is the GPU's failure, not the link's. Without this rule the earliest root
candidate wins, however long the attempt ran after it.

A job script that runs its launcher again (a retry loop around ``srun``) prints no restart
line, but Slurm keeps each run as a step: the attempt's ``relaunch_ts`` (a step that began
once every earlier one had ended) are its restarts too.

For each attempt with restarts (``launcher.elastic_restart``, or relaunched steps), the root candidates
stamped before the last restart it then went on working after for more than
:data:`OUTLIVED`, and their confirmations, become ``context``: that restart's next
failure — the first cascade or root candidate stamped more than :data:`SETTLE` after it
(the old workers' teardown comes first), or the attempt's end — came that much later.
Only when a root candidate after that restart says what ended the attempt, and only the
earlier roots not of its node and domain (a later root naming no node, as slurmstepd's
node-failure banner, stands for every node in its domain): a node that failed before the
restart and is blamed in that domain again after it (its CPU's machine check, then Slurm
losing it while the restarted workers waited for it) is one failure. A restart that failed again at once (the GPU still gone, no
new line about it) keeps the earlier root. The cascades the demoted roots had are relinked
by the engine afterwards.

Declared in ``states.yaml``, before the rules that read what is missing (the straggler
rule acts only on attempts without a root). Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.config import EngineConfig
from engine.rules.python_rules import with_role

RESTART_EVENT = "workload.elastic_restart"
"""The event of the agent's restart line (``cuda_framework.yaml``)."""
OUTLIVED = timedelta(seconds=EngineConfig().seconds("fail_at_once"))
"""How long an attempt must go on after a restart for what failed before it to be over
(the engine's ``fail_at_once`` default)."""
SETTLE = timedelta(minutes=2)
"""The restart's own teardown: the old workers' signals and errors printed this soon after
it belong to the failure before it."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Demote the root candidates each attempt outlived by restarting (see the module docstring)."""
    relaunched = (
        context.attempts.select("attempt_id", "end_ts", pl.col("relaunch_ts").alias("ts"))
        .explode("ts").drop_nulls("ts")
    )
    restarts = pl.concat([
        events.filter(pl.col("event") == RESTART_EVENT).select("attempt_id", "ts", "end_ts"),
        relaunched.join(events.select("attempt_id").unique(), on="attempt_id", how="semi")
        .select("attempt_id", pl.col("ts").cast(events.schema["ts"]), pl.col("end_ts").cast(events.schema["end_ts"])),
    ])
    if restarts.is_empty():
        return events
    # Each restart's next failure: the first cascade or root candidate past its teardown
    # (a forward as-of lookup per attempt), or the attempt's end.
    failures = (
        events.filter(pl.col("role").is_in(["cascade", "root_candidate"]))
        .select("attempt_id", pl.col("ts").alias("_failed")).drop_nulls().sort("_failed")
    )
    resumed = (
        restarts.select("attempt_id", pl.col("ts").alias("_restart"), "end_ts")
        .with_columns((pl.col("_restart") + SETTLE).alias("_settled")).sort("_settled")
        .join_asof(failures, left_on="_settled", right_on="_failed", by="attempt_id", strategy="forward",
                   check_sortedness=False)
        .filter(pl.coalesce("_failed", "end_ts") > pl.col("_restart") + OUTLIVED)
        # The last restart the attempt outlived: everything before it is over.
        .group_by("attempt_id").agg(pl.col("_restart").max())
    )
    if resumed.is_empty():
        return events
    # What ended the attempt: its root candidates after that restart's teardown. A fault
    # before the restart on a node one of them names is that node's one failure going on
    # (a CPU's machine check, the restart left waiting for the dead node, Slurm's NODE_FAIL).
    # A later root that names no node (slurmstepd's "DUE TO NODE FAILURE" banner, printed
    # on the batch host) may be about any node: it stands for all of them in its domain.
    place = pl.concat_str([pl.col("node").fill_null("*"), pl.col("domain")], separator="/")
    anywhere = pl.concat_str([pl.lit("*"), pl.col("domain")], separator="/")
    later = (
        events.join(resumed, on="attempt_id")
        .filter((pl.col("role") == "root_candidate") & (pl.col("ts") > pl.col("_restart") + SETTLE))
        .group_by("attempt_id").agg(place.unique().alias("_later"))
    )
    marked = events.join(resumed.join(later, on="attempt_id"), on="attempt_id", how="left", maintain_order="left")
    # Their confirmations too: left as such, the engine would make them roots again once
    # the root they confirm is gone.
    recovered = (
        pl.col("role").is_in(["root_candidate", "confirmation"]) & (pl.col("ts_hi") <= pl.col("_restart"))
        & ~pl.col("_later").list.contains(place) & ~pl.col("_later").list.contains(anywhere)
    ).fill_null(False)
    return with_role(marked, recovered, "context").drop("_restart", "_later")
