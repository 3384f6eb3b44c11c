"""The node Slurm lost: a node of a NODE_FAIL attempt that booted soon after it ended, or
whose kernel reported a stalled CPU while it ran, or that slurmctld found not responding
while it ran (and not found responding again before it ended).

Slurm ends an attempt NODE_FAIL when one of its nodes stops answering, but its record does
not say which. A node that lost power or hung prints nothing more: its log stops, and the
next lines it writes are a new boot's (``host.node_boot``, the kernel's ``Linux version``
line), often after the attempt ended. Such a node, booting between the attempt's start and
:data:`REBOOT_WITHIN` after its end, is the one that failed. So is a node whose kernel
reported a CPU stall (:data:`STALL_EVENTS`: RCU stall, soft lockup) between the attempt's
start and end: alone such a report is context, a CPU that often recovers, but a node that
stopped answering after one hung. So is a node slurmctld reported ``not responding``
(:data:`NOT_RESPONDING_EVENT`) while the attempt ran, unless it reported it ``now
responding`` before the end: the node Slurm lost, named by Slurm itself. Each becomes a
``host`` root candidate, timed at the attempt's end (when Slurm gave up on it; the failure
itself lies somewhere before); a boot, which says the node did go down, is preferred.

Only attempts left without a root candidate that names a node get this event: a line
naming the fault (a power-off, a kernel panic, an XID) says more than a reboot does, while
Slurm's own "DUE TO NODE FAILURE" line (:data:`BANNER_RULE`) names only the node it was
printed on, if any (the batch host, in slurmstepd's syslog); it becomes a confirmation of
the node found. The boots and stalls are looked up among the attempt's own events and the
lake's past events (``context.history``), since a reboot usually comes after the attempt's
window closed.

A node can die before Slurm notices: its peers' NCCL connections to it give up within
seconds (``NET/IB … retry`` errors naming its address), the job fails, and sacct says
FAILED, not NODE_FAIL. The shared end of those connections that reported nothing itself
(``ib_peer.py``'s root for it) and booted again within :data:`REBOOT_SOON` of the attempt's
end crashed or lost power, its log lost with it: it gets the same ``host`` root, at the
moment the peers noticed, and the fabric root becomes its confirmation. A later boot is
more likely an operator's, after whatever else was wrong.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.rules.python_rules import (
    BOOT_EVENT, known_events, link_to_roots, new_events, node_down_events, rebooted, rooted_attempts,
)

RULE_ID = "node_lost"
CAUSES = (("host.node_failure", "host", "root_candidate", "host.node_lost"),)
"""The lost node, named as the root of its NODE_FAIL attempt."""
REBOOT_WITHIN = timedelta(hours=2)
"""How long after a NODE_FAIL attempt ended a boot of one of its nodes still names it."""
REBOOT_SOON = timedelta(minutes=30)
"""How soon after an attempt ended the silent shared end of its failing connections booted
again for its death to be the cause (a crashed node's watchdog or BMC restarts it)."""
BANNER_RULE = "scheduler.slurm_cancelled_node_failure"
"""slurmstepd's "DUE TO NODE FAILURE" banner: it says a node failed, never which."""
SILENT_END_EVENT = "network.ib_common_peer"
"""``ib_peer.py``'s root for the node every failing connection names, which reported nothing."""
STALL_EVENTS = ["host.rcu_stall", "host.soft_lockup"]
"""Kernel reports of a stalled CPU: during a NODE_FAIL attempt they name their node."""
NOT_RESPONDING_EVENT = "host.node_not_responding"
"""slurmctld's ``Nodes <n> not responding`` (``scheduler.yaml``): during a NODE_FAIL attempt
it names the node Slurm lost, unless slurmctld saw it respond again before the end."""
RESPONDING_EVENT = "host.node_responding"
"""slurmctld's ``Node <n> now responding``: the node came back."""
HISTORY_EVENTS = (BOOT_EVENT, *STALL_EVENTS, NOT_RESPONDING_EVENT, RESPONDING_EVENT)
"""The boots, stalls and slurmctld's reports looked up in past events (``context.history``)."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Add a ``host.node_failure`` root for each node that booted after, or reported a CPU
    stall during, a rootless NODE_FAIL attempt, and for the silent shared end of an
    attempt's failing connections that booted soon after it (see the module docstring)."""
    events = _silent_end_rebooted(events, context)
    lost = context.attempts.filter(pl.col("state") == "node_fail")
    if lost.is_empty():
        return events
    # Slurm's node-failure lines that name no failed node leave the attempt open to this rule.
    unnamed = (pl.col("event") == "host.node_failure") & (pl.col("node").is_null() | (pl.col("rule_id") == BANNER_RULE))
    lost = lost.join(rooted_attempts(events.select("attempt_id", "role", "event", "node", "rule_id").filter(~unnamed)), on="attempt_id", how="anti")
    signs = known_events(events, context, [BOOT_EVENT, *STALL_EVENTS, NOT_RESPONDING_EVENT],
                         ["cluster", "node", "ts", "origin", "source", "event"])
    if lost.is_empty() or signs.is_empty():
        return events
    booted = pl.col("event") == BOOT_EVENT
    silent = pl.col("event") == NOT_RESPONDING_EVENT
    ts, start, end = pl.col("ts"), pl.col("start_ts"), pl.col("end_ts")
    candidates = (
        lost.select("attempt_id", "cluster", "job_id", "user", "state", "start_ts", "end_ts", pl.col("nodes").alias("node"))
        .explode("node")
        .join(signs, on=["cluster", "node"])
        .filter((ts > start) & pl.when(booted).then(ts <= end + REBOOT_WITHIN).otherwise(ts <= end))
    )
    # A node slurmctld found responding again before the end was not the one it lost.
    back = known_events(events, context, [RESPONDING_EVENT], ["cluster", "node", "ts"]).rename({"ts": "_back"})
    answered = (
        candidates.filter(silent).select("attempt_id", "cluster", "node", "ts", "end_ts", "event")
        .join(back, on=["cluster", "node"])
        .filter((pl.col("_back") > pl.col("ts")) & (pl.col("_back") <= pl.col("end_ts")))
    )
    found = (
        candidates.join(answered, on=["attempt_id", "node", "ts", "event"], how="anti")
        # A boot says more than a stall (the node did go down): it is the one kept.
        .sort("attempt_id", "node", booted, "ts", "origin", descending=[False, False, True, False, False])
        .group_by("attempt_id", "node", maintain_order=True)
        .first()
    )
    if found.is_empty():
        return events
    stamp = pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    message = pl.concat_str([
        pl.lit("node "), pl.col("node"), pl.lit(" stopped answering (Slurm ended the job NODE_FAIL at "),
        pl.col("end_ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
        pl.when(booted).then(pl.concat_str([pl.lit(") and booted again at "), stamp, pl.lit(": it lost power, hung or crashed")]))
        .when(silent).then(pl.concat_str([pl.lit(") after slurmctld found it not responding at "), stamp,
                                          pl.lit(": it lost power, hung, crashed or lost its network")]))
        .otherwise(pl.concat_str([pl.lit(") after its kernel reported a stalled CPU at "), stamp, pl.lit(": it hung")])),
    ])
    precise = pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ")
    params = (
        pl.when(booted).then(pl.struct(precise.alias("booted")).struct.json_encode())
        .when(silent).then(pl.struct(precise.alias("not_responding")).struct.json_encode())
        .otherwise(pl.struct(precise.alias("stalled")).struct.json_encode())
    )
    added = new_events(
        found.with_columns(
            message.alias("message"),
            params.alias("params"),
            pl.lit("inferred").alias("ts_source"),
        ).with_columns(pl.col("end_ts").alias("ts")).drop("event"),
        events, rule_id=RULE_ID, event="host.node_lost", domain="host", cause="host.node_failure",
        role="root_candidate", action="check_host",
    )
    first = added.group_by("attempt_id").agg(pl.col("event_id").min().alias("_root"))
    links = events.filter(unnamed & (pl.col("role") == "root_candidate")).select("attempt_id", "event_id").join(
        first, on="attempt_id"
    )
    return pl.concat([link_to_roots(events, links, "confirmation"), added])


def _silent_end_rebooted(events: pl.DataFrame, context) -> pl.DataFrame:
    """``events`` with a ``host.node_failure`` root added for each silent shared end
    (:data:`SILENT_END_EVENT`) that booted between its attempt's start and
    :data:`REBOOT_SOON` after its end, that end's fabric root made its confirmation."""
    ends = events.filter((pl.col("event") == SILENT_END_EVENT) & (pl.col("role") == "root_candidate"))
    if ends.is_empty():
        return events
    found = rebooted(ends, events, context, since=pl.col("start_ts"), until=pl.col("end_ts") + REBOOT_SOON,
                     key="event_id")
    if found.is_empty():
        return events
    why = pl.concat_str([pl.lit("node "), pl.col("node"), pl.lit(" stopped answering: every failing connection of the "
                                                                 "attempt names it and it reported nothing itself")])
    added = node_down_events(found, events, rule_id=RULE_ID, why=why)
    links = found.select("attempt_id", "event_id").join(
        added.select("attempt_id", pl.col("event_id").alias("_root")), on="attempt_id")
    return pl.concat([link_to_roots(events, links, "confirmation"), added])
