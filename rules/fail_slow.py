"""A GPU or a node slowed down for most of a run that then hit its time limit: the fail-slow root.

A GPU held back by heat or its power brake prints no error: DCGM's health watch and the
driver only report the slowdown (``gpu_thermal_power_slowdown``, ``context`` on its own, as
a short throttle is harmless), and DCGM's temperature gauge how long it ran hot; so does
the kernel for a node whose CPUs run hot
(``host.cpu_thermal_throttle``). In a synchronous job every rank waits for the slowest one
each step, so one GPU or node throttled for most of the run drags the whole job past its
time limit, and the scheduler's TIMEOUT hides why.

This rule makes those reports the root candidates of an attempt that ended in TIMEOUT with
no other root (slurmstepd's time-limit banner is the stop being explained, not a rival), when one GPU (or one node's, for reports naming no GPU) was reported slowed
at least :data:`MIN_REPORTS` times, first to last over at least :data:`MIN_SHARE` of the
attempt's run time: a sustained slowdown, not a throttle in passing. No error line backs it
and the time limit may have been too short anyway, so the verdict cannot be corroborated
by the state and stays ``probable``. The GPU index DCGM names (``dcgm_gpu``) fills the
event's GPU where the line gave none.

A GPU or an InfiniBand/RoCE adapter whose PCIe link the kernel reported trained narrower
than the device can run (``pcie_bandwidth_limited`` under the ``nvidia`` or ``mlx5_core``
driver, x4 of x16) ran slow the whole run: the link stays so until the next boot, so the one
report is sustained by itself, and it becomes the root candidate of such an attempt in the
same way. The driver reports it once, as it probes the device at boot, often hours before
the job and outside its window: the node's last such report is looked up among past events
(``context.history``) too, unless the node booted again since, and copied into the attempt.
Such a link held the job back from its first step; where a slowdown that began in the run
lasted through it too (a port bouncing all run, a GPU throttled), that is what changed, and
the narrow link stays ``context``.

A port that went down and came back up again and again through the run (a failing cable or
transceiver) slowed it the same way: each bounce was outlived (``network.link_down`` is then
``context``, :func:`engine.relabel.demote_outlived_roots`), but every collective through the
port stalled and retried at each. Its link-downs become the root candidates of such an
attempt under the same rule (at least :data:`MIN_REPORTS`, first to last over
:data:`MIN_SHARE` of the run, on one node's port), marked
:data:`engine.rules.python_rules.SUSTAINED_PARAM` so that the job reporting progress after
them does not demote them again.

Megatron-LM's straggler detector names the slowest rank of each logging interval from rank
0's output (``MxRtt/Rnk: 6341.67ms/726``, ``gpu_health.yaml``). Each report whose slowest
round trip is at least :data:`MIN_SPREAD` times the fastest, naming the rank the
attempt's reports name slowest in more than :data:`MIN_SHARE` of them, becomes a report of
that rank's GPU: on node ``rank // processes per node`` of the attempt, GPU ``rank %
processes per node`` (Megatron binds each process to the GPU of its local rank). The same
rank slowest in reports spanning most of the run is then promoted as any other slowdown
is; a rank slowest only now and then is not, however long the run its reports span.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

import polars as pl

from engine.rules.python_rules import (
    BOOT_EVENT, SLOWDOWN_CAUSES, SUSTAINED_PARAM, known_events, new_events, not_rebooted, param, rooted_attempts,
    with_param, with_role,
)
from ingest.schema import processes_per_node

RULE_ID = "fail_slow"

TIME_LIMIT_CAUSE = "scheduler.time_limit"
"""The cause of slurmstepd's time-limit banner: the stop this rule explains, not a rival root."""
MIN_REPORTS = 3
"""Reports of one GPU's slowdown (or bounces of one port) an attempt needs (a flood's repeats count)."""
MIN_SHARE = 0.5
"""The share of the attempt's run time the reports must span, first to last; and of its
straggler detector's reports, the share that must name one rank slowest (more than it)."""
NARROW_EVENT = "pcie_bandwidth_limited"
NARROW_CAUSE = "host.pcie_link_degraded"
NARROW_DRIVERS = ("nvidia", "mlx5_core")
"""The drivers whose report of a narrow link is about their own device: a GPU's, a ConnectX
adapter's. The PCI core's own enumeration notice (driver ``pci``) is left alone."""
NARROW_LINK = (
    (pl.col("event") == NARROW_EVENT) & param("driver").is_in(NARROW_DRIVERS)
    & (param("width").cast(pl.Int32, strict=False) < param("capable_width").cast(pl.Int32, strict=False))
).fill_null(False)
"""A GPU's or an adapter's link trained narrower than it can run (``gpu_health.yaml``)."""
NARROW_COLUMNS = ["cluster", "node", "ts", "gpu", "origin", "message", "source", "ts_source", "params", "action", "event"]
"""What a narrow link's report carries over to its copy in a later attempt."""
HISTORY_EVENTS = (NARROW_EVENT, BOOT_EVENT)
"""Narrow links reported at boot, and the boots that end them, looked up in past events."""
BOUNCING_PORT = pl.col("cause") == "network.link_down"
"""A port's link-down (``fabric.yaml``): repeated through the run, a bouncing port."""
LINK = pl.when(BOUNCING_PORT).then(pl.coalesce(pl.col("port"), param("netdev"), param("pci")))
"""Which link a link-down is of: its HCA port, else its netdev (``ibp26s0: Link down``), else
its PCI function; null for other events."""
STRAGGLER_REPORT = "gpu.straggler_report"
"""Megatron-LM's straggler detector's report (``gpu_health.yaml``), printed by rank 0."""
STRAGGLER_CAUSE = "gpu.straggler"
CAUSES = ((STRAGGLER_CAUSE, "gpu", "root_candidate", STRAGGLER_REPORT),
          (NARROW_CAUSE, "host", "root_candidate", NARROW_EVENT))
MIN_SPREAD = 1.1
"""How much longer than the fastest rank's the slowest rank's round trip must be for a
straggler report to count: ranks a few percent apart are noise."""
PLACED_STRAGGLER = (pl.col("rule_id") == RULE_ID) & (pl.col("event") == STRAGGLER_REPORT)
"""A straggler report placed on the slowest rank's node and GPU (:func:`_stragglers`)."""


def _stragglers(events: pl.DataFrame, context) -> pl.DataFrame:
    """Each straggler report of a timed-out attempt with a spread of at least
    :data:`MIN_SPREAD` naming the rank most of the attempt's reports name slowest, as a
    ``context`` event on that rank's node and GPU (see the module docstring); none for a
    rank the attempt's nodes do not cover."""
    slowest = param("slow_rank").cast(pl.Int64, strict=False)
    spread = (param("slow_ms").cast(pl.Float64, strict=False)
              >= MIN_SPREAD * param("fast_ms").cast(pl.Float64, strict=False)).fill_null(False)
    # Of all the attempt's reports (a flood's repeats counting), the rank must be the one
    # named slowest in most: a rank slowest now and then across the run spans it as well.
    reports = (
        events.filter((pl.col("event") == STRAGGLER_REPORT) & (pl.col("state") == "timeout"))
        .with_columns(
            (pl.col("count").sum().over("attempt_id", slowest) / pl.col("count").sum().over("attempt_id")).alias("_share")
        )
        .filter(spread & (pl.col("_share") > MIN_SHARE))
        .drop("_share")
    )
    if reports.is_empty():
        return events.clear()
    layout = context.attempts.select("attempt_id", pl.col("nodes").alias("_nodes"),
                                     processes_per_node().alias("_procs"))
    placed = (
        reports.join(layout, on="attempt_id")
        .filter(pl.col("_procs") > 0)
        .with_columns(
            pl.col("_nodes").list.get(slowest // pl.col("_procs"), null_on_oob=True).alias("node"),
            (slowest % pl.col("_procs")).cast(pl.String).alias("gpu"),
            slowest.cast(pl.Int32).alias("rank"),
        )
        .drop_nulls("node")
    )
    return new_events(placed.drop("event_id", "rule_id", "_nodes", "_procs"), events, rule_id=RULE_ID,
                      event=STRAGGLER_REPORT, domain="gpu", cause=STRAGGLER_CAUSE, role="context",
                      action="check_host")


def _narrow_since_boot(events: pl.DataFrame, context) -> pl.DataFrame:
    """A copy, in each timed-out attempt without a root, of the last narrow-link report
    (:data:`NARROW_LINK`) of each of its nodes' devices before it started, where the node did
    not boot again in between and the attempt does not hold that report already (see the
    module docstring); ``context`` events, which :func:`_promoted` then makes its roots."""
    timed_out = events.filter(pl.col("state") == "timeout").select("attempt_id").unique()
    rootless = timed_out.join(rooted_attempts(events.filter(pl.col("cause") != TIME_LIMIT_CAUSE)), on="attempt_id",
                              how="anti")
    reports = known_events(events, context, [NARROW_EVENT], NARROW_COLUMNS).filter(NARROW_LINK)
    if rootless.is_empty() or reports.is_empty():
        return events.clear()
    carried = [c for c in context.attempts.columns if c in events.columns and c not in NARROW_COLUMNS]
    pairs = (
        context.attempts.join(rootless, on="attempt_id").select(*carried, "cluster", pl.col("nodes").alias("node"))
        .explode("node")
        .join(reports, on=["cluster", "node"])
        .filter(pl.col("ts") < pl.col("start_ts"))
        .join(events.select("attempt_id", "origin"), on=["attempt_id", "origin"], how="anti")
    )
    since_boot = not_rebooted(pairs, events, context, since=pl.col("ts"), until=pl.col("start_ts"))
    last = (
        since_boot.sort("attempt_id", "node", "gpu", "ts", "origin")
        .unique(["attempt_id", "node", "gpu"], keep="last", maintain_order=True)
        .with_columns((pl.col("message") + pl.lit(" (reported at boot; no boot since)")).alias("message"))
    )
    return new_events(last, events, rule_id=RULE_ID, event=NARROW_EVENT, domain="host",
                      cause=NARROW_CAUSE, role="context", action=pl.col("action"))


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Promote the slowdown reports of each timed-out attempt without a root whose one GPU
    was slowed over most of the run to root candidates (see the module docstring). Placed
    straggler reports that are not promoted are dropped: rank 0's own report line stays."""
    promoted = _promoted(pl.concat([events, _stragglers(events, context), _narrow_since_boot(events, context)]))
    return promoted.filter(~(PLACED_STRAGGLER & (pl.col("role") == "context")))


def _promoted(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the sustained slowdown reports made root candidates."""
    slow = (pl.col("cause").is_in(SLOWDOWN_CAUSES) | NARROW_LINK | PLACED_STRAGGLER | BOUNCING_PORT) \
        & (pl.col("role") == "context") & (pl.col("state") == "timeout")
    if events.is_empty() or not events.select(slow.any()).item():
        return events
    # An adapter's narrow link names its PCI function where a GPU's would be: it is no GPU.
    adapter = NARROW_LINK & (param("driver") == "mlx5_core")
    events = events.with_columns(
        pl.when(~adapter).then(pl.coalesce(pl.col("gpu"), param("dcgm_gpu"))).alias("_gpu"), LINK.alias("_link"))
    rivals = rooted_attempts(events.filter(pl.col("cause") != TIME_LIMIT_CAUSE))
    reports = events.filter(slow).join(rivals, on="attempt_id", how="anti")
    runtime = pl.col("end_ts").first() - pl.col("start_ts").first()
    sustained = (
        reports.group_by("attempt_id", "node", "_gpu", "_link")
        .agg(
            NARROW_LINK.any().alias("_narrow"),
            pl.col("count").sum().alias("_reports"),
            (pl.col("last_ts").max() - pl.col("ts").min()).alias("_span"),
            runtime.alias("_runtime"),
        )
        .filter(
            pl.col("_narrow")
            | ((pl.col("_reports") >= MIN_REPORTS)
               & (pl.col("_span").dt.total_microseconds() >= MIN_SHARE * pl.col("_runtime").dt.total_microseconds()))
        )
        # A link narrow since boot held the job back from its first step; a slowdown that
        # began in the run and lasted through it is what changed: where the run has one,
        # the narrow link stays context.
        .filter(~pl.col("_narrow") | pl.col("_narrow").all().over("attempt_id"))
        .select("attempt_id", "node", "_gpu", "_link", pl.lit(True).alias("_sustained"))
    )
    if sustained.is_empty():
        return events.drop("_gpu", "_link")
    marked = events.join(sustained, on=["attempt_id", "node", "_gpu", "_link"], how="left", nulls_equal=True,
                         maintain_order="left")
    promote = slow & pl.col("_sustained").fill_null(False)
    marked = with_param(marked, promote & BOUNCING_PORT, SUSTAINED_PARAM, "the port went down again and again through the run")
    # The GPU first: once promoted, the rows no longer read as ``context``.
    marked = marked.with_columns(pl.when(promote).then(pl.col("_gpu")).otherwise(pl.col("gpu")).alias("gpu"))
    return with_role(marked, promote, "root_candidate").drop("_gpu", "_link", "_sustained")
