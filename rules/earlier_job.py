"""Events of what ran on a node before an attempt started, or beside it, are context for it.

A node event attaches to every attempt whose window — from ``lookback`` before its start
to ``grace`` after its end — reaches it, so that a GPU that fell off the bus shortly before
a job started still explains the job's failure. Some events cannot outlive what they
happened to: an OOM kill or the kernel's report of a segfault ends the process it names,
XID 13/31/43 end the GPU context of the process that faulted, a contained ECC error (XID
94) ends the process whose memory it hit and leaves the GPU in service, a power-off or an
announced reboot ends the boot the node was in, and a stopped slurmd ends with the daemon
(a job that started on the node later was launched by a slurmd started again). Stamped
before the attempt started, they belong to the job (or the boot) before it: for this
attempt they are ``context``, never its root. Stamped during it, they are its own, unless
it went on working for more than :data:`OUTLIVED` after them (after the latest moment
they can have been printed, ``ts_hi``: an unstamped line only inherited an earlier stamp;
started failing later:
its first cascade other than such an event's own, as the OOM reaper's line, its first
other root candidate or confirmation, or its end): then the
process they ended was another job's on a node they shared (an XID 13 of the job on the
other four GPUs), ``context`` too. So are they when another attempt on the node claims them
and this one does not: its own process reported the same fault (a CUDA "illegal memory
access" precedence made the XID's confirmation), the process they ended was that job's.
The same holds for any fault the node's kernel reports of a GPU it names
(:data:`engine.relabel.GPU_DOMAINS`: a GPU off the bus, an uncontained ECC error, an NVLink error): on a
node whose GPUs several jobs share out, a fault of a GPU another job's process reported
and this job's did not (no CUDA error of its own on that node within :data:`OUTLIVED`)
struck that job's GPU, not this one's; only an attempt running when it happened claims it.
Only the claim says so: stamped before the start, such a fault may still be why the job
failed (a GPU that fell off the bus is missing for the next job too), unless the node booted
again between the fault and the start: the boot reset the GPU, which came back or failed to
initialise, and the boot's own lines say which (``lost_gpu.py``), so the fault before it is
``context``. A CUDA out-of-memory
error is a weak claim (:data:`WEAK_CLAIMS`): a job runs out of memory of its own accord,
and a broken GPU only sometimes shows that way first. When another running attempt claims
the fault with an error the fault itself raises (an uncorrectable ECC error, an illegal
access) and this one's only claim, or only CUDA error near it, is running out of memory,
the fault is the other job's: on a shared node the neighbour's GPU failed while this job
ran out of memory on its own.

Declared in ``host.yaml``, after ``xid_roles`` (``gpu_xid.yaml``), whose repeat-offender
upgrade does not outrank this. Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.config import NODE_LOG_SOURCES, EngineConfig
from engine.relabel import GPU_DOMAINS, failing_since
from engine.rules.python_rules import BOOT_EVENT, at_rows, rebooted, with_role

ENDED_BEFORE_START = (
    "host.oom_kill",
    "host.cgroup_oom_kill",
    "host.oom_report",
    "host.oom_reaped",
    "host.node_power_off",
    "host.node_reboot_announced",
    "scheduler.slurmd_stopped",
    "xid_13_graphics_exception",
    "xid_31_mmu_fault",
    "xid_43_channel_stopped",
    "xid_94_contained_ecc",
)
"""Event names (``host.yaml``, ``scheduler.yaml``, ``gpu_xid.yaml``) that end with the
process, boot or daemon they happened to."""
KERNEL_SEGFAULT = (pl.col("event") == "workload.segfault") & pl.col("params").str.contains('"pid": ?"')
"""The kernel's report of a process that segfaulted (``framework.native_segfault``'s form
naming the process and its pid; the application's own reports name neither, their
``pid`` is null): it ends the process it names, as an OOM kill does, so on a shared node
another job's crash is not this attempt's root."""


OUTLIVED = timedelta(seconds=EngineConfig().seconds("fail_at_once"))
"""How long an attempt may go on after such an event and still have died of it (the
engine's ``fail_at_once`` default): a process killed by it fails its job at once."""


HISTORY_EVENTS = (BOOT_EVENT,)
"""The node's boots, looked up in past events too (:func:`_before_a_boot`)."""


WEAK_CLAIMS = ("workload.cuda_oom",)
"""Events of errors a process raises of its own accord as often as a GPU fault makes it:
a claim by one of them yields to another job's claim by an error the fault raises."""


CLAIM_WINDOW = timedelta(minutes=1)
"""How close to a claimed event another event on the same GPU is one fault with it (the
driver reports one fault as XID 31, 13 and 43 within milliseconds)."""


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Demote the :data:`ENDED_BEFORE_START` events stamped before their attempt started,
    that their attempt outlived by more than :data:`OUTLIVED`, or that another attempt
    claims (see the module docstring)."""
    bound = pl.col("event").is_in(ENDED_BEFORE_START) | KERNEL_SEGFAULT.fill_null(False)
    earlier = bound & (pl.col("ts") < pl.col("start_ts")).fill_null(False)
    during = bound & ~earlier
    of_a_gpu = pl.col("gpu").is_not_null() & pl.col("domain").is_in(GPU_DOMAINS) & pl.col("source").is_in(NODE_LOG_SOURCES)
    claimed = _claimed_by_another(events, bound | of_a_gpu)
    is_bound = events.select(bound).to_series()
    # A GPU fault another attempt claims stays this one's when its own CUDA error is near:
    # looked up only when there is such a claim (most chunks have none).
    gpu_claims = claimed & ~is_bound
    if gpu_claims.any():
        gpu_claims = gpu_claims & ~_own_cuda_error_near(events)
    demoted = earlier | (claimed & is_bound) | gpu_claims | _before_a_boot(
        events, context, of_a_gpu & (pl.col("ts") < pl.col("start_ts")).fill_null(False))
    suspects = events.filter(during & (pl.col("role") == "root_candidate"))["attempt_id"].unique()
    if not suspects.is_empty():
        # Failing: its first cascade, its first other root candidate or confirmation (the
        # CUDA error a contained ECC error caused), or its end; not the kill's own lines (the
        # reaper's cascade of the OOM kill), which say nothing of the job.
        others = pl.col("role").is_in(["root_candidate", "confirmation"]) & ~bound
        failing = failing_since(events.filter(pl.col("attempt_id").is_in(suspects.implode()) & ~bound), others)
        # A narrow frame joins the failing times: the wide rows are not copied for a mask.
        outlived = (
            events.select("attempt_id", "ts_hi", during.alias("_during"))
            .join(failing, on="attempt_id", how="left", maintain_order="left")
            .select(pl.col("_during") & (pl.col("_failing") > pl.col("ts_hi") + OUTLIVED).fill_null(False))
            .to_series()
        )
        demoted = demoted | outlived
    return with_role(events, demoted, "context")


def _before_a_boot(events: pl.DataFrame, context, faults: pl.Expr) -> pl.Series:
    """Per row: one of ``faults`` (a GPU's, stamped before its attempt started) after which
    its node booted again before the attempt started."""
    rows = events.with_row_index("_row").filter(faults).select("_row", "cluster", "node", "ts", "start_ts")
    if rows.is_empty():
        return pl.repeat(False, events.height, eager=True)
    booted = rebooted(rows, events, context, since=pl.col("ts"), until=pl.col("start_ts"), key="_row")
    return at_rows(events, booted["_row"])


def _own_cuda_error_near(events: pl.DataFrame) -> pl.Series:
    """Per row: its attempt reported a CUDA error (a ``cuda.*`` rule's event, whatever its
    role: "unknown error" is context; not one of :data:`WEAK_CLAIMS`) on the row's node
    within :data:`OUTLIVED` of it. Its
    process may have been on that GPU too (two MIG slices of one GPU): a claim by another
    attempt does not take the GPU's fault away from it."""
    rows = events.select("attempt_id", "node", "ts").with_row_index("_i")
    errors = events.filter(pl.col("rule_id").str.starts_with("cuda.") & ~pl.col("event").is_in(WEAK_CLAIMS)).select(
        "attempt_id", "node", pl.col("ts").alias("_error_ts"))
    if errors.is_empty():
        return pl.repeat(False, events.height, eager=True)
    near = (
        rows.join(errors, on=["attempt_id", "node"])
        .filter((pl.col("_error_ts") - pl.col("ts")).abs() <= OUTLIVED)["_i"].unique()
    )
    return rows.select(pl.col("_i").is_in(near.implode())).to_series()


def _claimed_by_another(events: pl.DataFrame, bound: pl.Expr) -> pl.Series:
    """Per row: a ``bound`` node event on a GPU (or, naming none, the very event) another
    attempt, running at the time, claims within :data:`CLAIM_WINDOW` (a confirmation of its
    own linked to it, ``caused_by``) while this row's attempt, running or not, claims none
    there, or only by a :data:`WEAK_CLAIMS` error where the other's claim is not one."""
    unit = pl.coalesce("gpu", "event_id").alias("_unit")
    rows = events.select("attempt_id", "cluster", "node", unit, "ts", bound.alias("_bound")).with_row_index("_i")
    linked = events.filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null()).group_by(
        "attempt_id", pl.col("caused_by").alias("event_id")).agg((~pl.col("event").is_in(WEAK_CLAIMS)).any().alias("_strong"))
    if linked.is_empty():
        return pl.repeat(False, events.height, eager=True)
    # Only another attempt that was running when the event happened takes it away: the next
    # job on the node confirms a GPU lost before it started (lost_gpu.py), which says
    # nothing of whose process it was. This attempt's own claim keeps it, running or not.
    claims = (
        events.filter(bound)
        .select("attempt_id", "event_id", "cluster", "node", unit, pl.col("ts").alias("_claim_ts"),
                (pl.col("ts") >= pl.col("start_ts")).fill_null(True).alias("_running"))
        .join(linked, on=["attempt_id", "event_id"])
        .select(pl.col("attempt_id").alias("_claimer"), "cluster", "node", "_unit", "_claim_ts", "_running", "_strong")
        .unique()
    )
    mine = pl.col("_claimer") == pl.col("attempt_id")
    others = ~mine & pl.col("_running")
    near = (
        rows.filter("_bound").join(claims, on=["cluster", "node", "_unit"])
        .filter((pl.col("ts") - pl.col("_claim_ts")).abs() <= CLAIM_WINDOW)
        .group_by("_i")
        .agg(mine=mine.any(), mine_strong=(mine & pl.col("_strong")).any(),
             others=others.any(), others_strong=(others & pl.col("_strong")).any())
        .filter((pl.col("others") & ~pl.col("mine")) | (pl.col("others_strong") & ~pl.col("mine_strong")))
    )
    return rows.select(pl.col("_i").is_in(near["_i"].implode())).to_series()
