"""The node Slurm lost: a node of a NODE_FAIL attempt that booted soon after it ended.

Slurm ends an attempt NODE_FAIL when one of its nodes stops answering, but its record does
not say which. A node that lost power or hung prints nothing more: its log stops, and the
next lines it writes are a new boot's (``host.node_boot``, the kernel's ``Linux version``
line), often after the attempt ended. Such a node, booting between the attempt's start and
:data:`REBOOT_WITHIN` after its end, is the one that failed: it becomes a ``host`` root
candidate, timed at the attempt's end (when Slurm gave up on it; the failure itself lies
somewhere in the node's silence before).

Only attempts left without any root candidate get this event: a line naming the fault
(a power-off, a kernel panic, an XID) says more than a reboot does. The boots are looked
up among the attempt's own events and the lake's past events (``context.history``), since
a reboot usually comes after the attempt's window closed.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import known_events, new_events, rooted_attempts

RULE_ID = "node_lost"
BOOT_EVENT = "host.node_boot"
REBOOT_WITHIN = timedelta(hours=2)
"""How long after a NODE_FAIL attempt ended a boot of one of its nodes still names it."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Add a ``host.node_failure`` root for each node that booted after a rootless NODE_FAIL
    attempt (see the module docstring)."""
    lost = context.attempts.filter(pl.col("state") == "node_fail")
    if lost.is_empty():
        return events
    lost = lost.join(rooted_attempts(events), on="attempt_id", how="anti")
    boots = known_events(events, context, [BOOT_EVENT], ["cluster", "node", "ts", "origin", "source"])
    if lost.is_empty() or boots.is_empty():
        return events
    found = (
        lost.select("attempt_id", "cluster", "job_id", "user", "state", "start_ts", "end_ts", pl.col("nodes").alias("node"))
        .explode("node")
        .join(boots, on=["cluster", "node"])
        .filter((pl.col("ts") > pl.col("start_ts")) & (pl.col("ts") <= pl.col("end_ts") + REBOOT_WITHIN))
        .sort("attempt_id", "node", "ts", "origin")
        .group_by("attempt_id", "node", maintain_order=True)
        .first()
    )
    if found.is_empty():
        return events
    message = pl.concat_str([
        pl.lit("node "), pl.col("node"), pl.lit(" stopped answering (Slurm ended the job NODE_FAIL at "),
        pl.col("end_ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"), pl.lit(") and booted again at "),
        pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"), pl.lit(": it lost power, hung or crashed"),
    ])
    added = new_events(
        found.with_columns(
            message.alias("message"),
            pl.struct(pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ").alias("booted")).struct.json_encode().alias("params"),
            pl.lit("inferred").alias("ts_source"),
        ).with_columns(pl.col("end_ts").alias("ts")),
        events, rule_id=RULE_ID, event="host.node_lost", domain="host", cause="host.node_failure",
        role="root_candidate", action="check_host",
    )
    return pl.concat([events, added])
