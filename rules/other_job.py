"""Node events the kernel attributes to another Slurm job are context for this attempt.

On a shared node (jobs that each hold some of its GPUs, cores and memory) the kernel's
lines concern every job's processes. Some name the job outright: the OOM killer's summary
gives the victim's memory cgroup, which Slurm names after the job
(``task_memcg=/slurm/uid_1187/job_4410622/step_0/task_0`` under cgroup v1,
``/system.slice/slurmstepd.scope/job_4410622/step_0/user/task_0`` under v2), captured as
``job``; a system service's process is in its unit's (``/system.slice/fluent-bit.service``),
captured as ``service`` (not slurmd's, where a job's tasks run without Slurm's cgroup
plugin). A kill of another job's process is that job's failure, and a kill of a service's
process (a log shipper, a monitoring agent) the service's, not this attempt's root, and
so are the lines of the same kill that do not name the job: the victim line, the reaper's,
names the same pid on the same node within :data:`SAME_KILL`. If the node's memory ran
short for the job too, the job's own processes are killed in turn, and those kills are
its root.

An attempt's own job id is :func:`engine.rules.python_rules.attempt_job_id`. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import attempt_job_id, param

SAME_KILL = timedelta(minutes=1)
"""How far apart the lines of one kill of one pid may be stamped."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Make the events of another job's or a system service's processes (see the module
    docstring) ``context``."""
    params = pl.col("params")
    named = (params.str.contains('"job":', literal=True) | params.str.contains('"service":', literal=True)).fill_null(False)
    if events.is_empty() or not events.select(named.any()).item():
        return events
    rows = events.with_row_index("_row")
    service = param("service")
    others = (param("job") != attempt_job_id()).fill_null(False) | (service.is_not_null() & ~service.str.starts_with("slurm"))
    foreign = rows.filter(named).filter(others).select(
        "_row", "attempt_id", "node", "ts", param("pid").alias("_pid")
    )
    if foreign.is_empty():
        return events
    killed = foreign.drop_nulls("_pid").select("attempt_id", "node", "_pid", pl.col("ts").alias("_kill_ts"))
    same_kill = (
        rows.filter(pl.col("params").str.contains('"pid":', literal=True).fill_null(False))
        .select("_row", "attempt_id", "node", "ts", param("pid").alias("_pid"))
        .join(killed, on=["attempt_id", "node", "_pid"])
        .filter((pl.col("ts") - pl.col("_kill_ts")).abs() <= SAME_KILL)
    )
    demoted = pl.concat([foreign["_row"], same_kill["_row"]]).unique()
    role = rows["role"].scatter(demoted, "context")
    return events.with_columns(role)
