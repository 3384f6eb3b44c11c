"""Events of what ran on a node before an attempt started are context for that attempt.

A node event attaches to every attempt whose window — from ``lookback`` before its start
to ``grace`` after its end — reaches it, so that a GPU that fell off the bus shortly before
a job started still explains the job's failure. Some events cannot outlive what they
happened to: an OOM kill ends the process it names, XID 13/31/43 end the GPU context of
the process that faulted, a contained ECC error (XID 94) ends the process whose memory it
hit and leaves the GPU in service, and a power-off ends the boot the node was in. Stamped
before the attempt started, they belong to the job (or the boot) before it: for this
attempt they are ``context``, never its root. Their own ones, after the start, keep their role.

Declared in ``host.yaml``, after ``xid_roles`` (``gpu_xid.yaml``), whose repeat-offender
upgrade does not outrank this. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

ENDED_BEFORE_START = (
    "host.oom_kill",
    "host.cgroup_oom_kill",
    "host.oom_report",
    "host.oom_reaped",
    "host.node_power_off",
    "xid_13_graphics_exception",
    "xid_31_mmu_fault",
    "xid_43_channel_stopped",
    "xid_94_contained_ecc",
)
"""Event names (``host.yaml``, ``gpu_xid.yaml``) that end with the process or boot they
happened to."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Demote the :data:`ENDED_BEFORE_START` events stamped before their attempt started."""
    earlier = pl.col("event").is_in(ENDED_BEFORE_START) & (pl.col("ts") < pl.col("start_ts")).fill_null(False)
    return events.with_columns(pl.when(earlier).then(pl.lit("context")).otherwise(pl.col("role")).alias("role"))
