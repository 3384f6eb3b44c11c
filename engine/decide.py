"""Decide: one verdict per attempt, vectorized over all attempts at once.

For an attempt that did not succeed the root cause is the earliest root candidate that
started before the attempt ended (plus clock skew); an attempt with none takes an
infrastructure one stamped later, within its grace (a node whose clock runs ahead), as a
root that is never ``definitive``. Cascades never replace it: they are not
candidates at all. Candidates closer to the root than the clock allows us to order (``clock
skew`` across nodes, ``tie_window`` on one node):

* in the same domain — the same incident seen on several nodes/GPUs: all are culprits;
* in another domain — competing explanations: ``quality = ambiguous``, listed in
  ``alternatives``. So is a candidate of another domain and another node known only
  within a span (an unstamped line, see :func:`engine.correlate.add_time_bounds`) that
  includes the root's moment: it may have come first, and a report of another node
  printed after the root that says its fault had lasted since before it (a CPU "stuck for
  48s", :func:`onset`).

A root candidate the attempt's progress reports went on long after, with another root
candidate printed long after it, is context: the job trained through it
(:func:`demote_outworked_roots`). So is a port back up (a storage connection restored)
before a progress report, beside a root candidate that may have come after that report
(:func:`demote_survived_outages`).

When no log line offers a root, the scheduler state's meaning (the pack's ``state`` rules:
TIMEOUT → ``scheduler.time_limit``…) is the fallback root (so it is when the only root is
a cancellation that gives no reason and the state gives one: DEADLINE), but not a time
limit, a cancellation or a preemption that ended a job whose watchdogs had reported a hung
collective long before (:func:`hung_before_the_end`); it names no culprit, except the node of a
one-node attempt whose state blames the infrastructure (NODE_FAIL, BOOT_FAIL). With neither, the verdict is ``unknown`` / ``insufficient``. A successful
attempt gets ``domain = none``.

Quality: ``definitive`` needs a root that is corroborated (a cascade or confirmation linked
to it or to another report it stands for — the scheduler's and launchers' teardown only for
an error the job printed itself —, a scheduler state with the same cause or one its state
rule ``agrees_with``, or NODE_FAIL for an infrastructure root) and complete coverage;
a root without corroboration, a fallback root, a root with a log source missing, a root a
rule placed between nodes without telling which is at fault (two nodes whose failing
connections name only each other: :data:`engine.rules.python_rules.UNDECIDED_PARAM`), or a
workload root whose node reports a hardware fault stamped within its grace after the end
is ``probable``; a fallback root with a log source missing, or the scheduler's end of a
job that had stalled or slowed down, is ``insufficient``.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pyarrow as pa

from engine.config import NODE_LOG_SOURCES, EngineConfig
from engine.outages import closed, confirmed, outage, recoveries
from engine.rules.loader import RulePack
from engine.rules.python_rules import (
    GPU_FAULT_CAUSES, RIVAL_PARAM, UNDECIDED_PARAM, origin_position, param, slows_the_job, with_role,
)
from ingest.files.common import TS_DTYPE
from ingest.schema import ALTERNATIVE, EVIDENCE, RESPONSIBILITY

INFRASTRUCTURE = ("gpu", "gpu_memory", "nvlink", "network", "host", "storage")

FAILED_STATES = (
    "failed", "cancelled", "timeout", "node_fail", "preempted", "out_of_memory", "boot_fail",
    "deadline",
)

DEFAULT_ACTION = {
    "gpu": "drain_node_and_restart", "gpu_memory": "reset_gpu_and_restart",
    "nvlink": "check_nvlink", "network": "check_fabric_port", "host": "check_host",
    "storage": "check_storage", "scheduler": "resubmit", "workload": "fix_workload",
    "unknown": "investigate", "none": "none",
}
"""Action when the root's rule names none."""

REPLACE_GPU = "replace_gpu"
"""The action that outranks the root's own when an event of the same incident asks for it: a
double-bit error (reset the GPU) beside the row remapping that failed to retire its row
(XID 64: the GPU has no spare rows left) calls for the GPU's replacement."""

ROLE_ORDER = {"root_candidate": 0, "confirmation": 1, "cascade": 2, "context": 3}
"""Which evidence to keep first when an attempt has more events than the limit."""
REASONLESS_CANCEL = "scheduler.cancelled"
"""The cause of a cancellation that says nobody's reason (slurmstepd's bare banner): a
scheduler state that names one (``scheduler.deadline``…) is the verdict instead."""
TIME_LIMIT = "scheduler.time_limit"
"""The cause of the scheduler's TIMEOUT (``states.yaml``)."""
NODE_FAILURE = "host.node_failure"
"""The cause of a node that stopped answering (srun's or slurmctld's word, a silent node
that booted again, Ray's missed heartbeats): it says the node went, never why, so a verdict
of it is ``probable`` at most."""
HUNG_BEFORE_LIMIT = timedelta(minutes=10)
"""How long before the end of an attempt the scheduler timed out a watchdog must have
reported a hung collective for the time limit to be only what stopped a hung job."""


def reports_timeout() -> pl.Expr:
    """Whether an event's params carry a ``timeout_ms`` (NCCL's watchdog reports): a
    literal search, cheap over every row, before the few are parsed."""
    return pl.col("params").str.contains('"timeout_ms"', literal=True).fill_null(False)


STALL_REPORTS = 5
"""How many progress reports (distinct seconds) an attempt must have printed for their
stopping to say anything (:func:`stalled`)."""
STALL_INTERVALS = 5
"""How many of its usual intervals between progress reports an attempt must have gone
without one before it ended to count as stalled (and at least :data:`HUNG_BEFORE_LIMIT`)."""
PROGRESS_COLUMNS = {"last_progress": TS_DTYPE, "progress_interval": pl.Duration("us"), "progress_reports": pl.UInt32,
                    "progress_center": pl.Float64}
"""The columns of an attempt's progress reports its coverage may carry
(:func:`engine.run.coverage_from_counts`)."""


def stalled() -> pl.Expr:
    """Whether an attempt (with ``end_ts`` and :data:`PROGRESS_COLUMNS`) stopped reporting
    progress long before it ended: it printed at least :data:`STALL_REPORTS` progress
    reports, and the last came more than :data:`STALL_INTERVALS` of their usual interval,
    and more than :data:`HUNG_BEFORE_LIMIT`, before the end. Such a job sat hung (or in a
    long silent phase: an evaluation, a checkpoint) when the scheduler ended it."""
    quiet = pl.col("end_ts") - pl.col("last_progress")
    return (
        (pl.col("progress_reports").fill_null(0) >= STALL_REPORTS)
        & (quiet > HUNG_BEFORE_LIMIT) & (quiet > pl.col("progress_interval") * STALL_INTERVALS)
    ).fill_null(False)


SLOWED_REPORTS = 20
"""How many progress reports an attempt must have printed for their spacing to say it slowed
down (:func:`slowed`)."""
SLOWED_CENTER = 0.45
"""Below this centre the reports thinned out as the run went on (:func:`slowed`): steps that
took twice as long by the end as at the start centre at 0.44, steady ones at 0.5."""


def slowed() -> pl.Expr:
    """Whether an attempt (with :data:`PROGRESS_COLUMNS`) slowed down as it ran: at least
    :data:`SLOWED_REPORTS` progress reports, whose mean moment lies before
    :data:`SLOWED_CENTER` of the way from the first to the last (a training loop logs every
    so many steps, so its reports come further apart as its steps take longer: a GPU failing
    slowly, held back by heat or its power brake, prints no error). A time limit that ended
    such a job says it ran out of time, not why it needed more."""
    return (
        (pl.col("progress_reports").fill_null(0) >= SLOWED_REPORTS) & (pl.col("progress_center") < SLOWED_CENTER)
    ).fill_null(False)


def with_progress(coverage: pl.DataFrame) -> pl.DataFrame:
    """``coverage`` with :data:`PROGRESS_COLUMNS` (null where it has none of them: no
    progress known)."""
    return coverage.with_columns(
        pl.lit(None, dtype).alias(name) for name, dtype in PROGRESS_COLUMNS.items() if name not in coverage.columns)


PREEMPTED = "scheduler.preempted"
"""The cause of a preemption (slurmstepd's ``DUE TO PREEMPTION`` banner, sacct's PREEMPTED)."""
LATE_ENDS = (REASONLESS_CANCEL, TIME_LIMIT, PREEMPTED)
"""Causes of the scheduler ending a job (a bare cancellation, the time limit, a preemption)
that only stopped it, when they came long after its collective hung
(:func:`engine.relabel.demote_roots_after_the_hang`), and that are no rival explanation
of an outage (:func:`engine.relabel.demote_recovered_outages`,
:func:`demote_survived_outages`)."""
ENDED_HUNG_STATES = ("timeout", "cancelled", "preempted")
"""The scheduler states of :data:`LATE_ENDS` (the time limit, a cancellation that gives no
reason, a preemption or requeue): no fallback root for a job already hung
(:func:`hung_before_the_end`)."""


def hung_before_the_end(events: pl.DataFrame, attempts: pl.DataFrame, coverage: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` of each attempt the scheduler ended at its time limit (TIMEOUT), that
    someone cancelled (CANCELLED) or the scheduler preempted or requeued (PREEMPTED), whose
    ranks' watchdogs had reported a hung collective more than :data:`HUNG_BEFORE_LIMIT`
    before (the latest moment the first report can have been printed, its ``ts_hi``), or
    reported one at all in an attempt that had :func:`stalled` (watchdog lines without a
    stamp of their own are known only up to the limit's banner; the progress reports that
    stopped hours before say when the job hung). ``coverage``: per attempt, with
    :data:`PROGRESS_COLUMNS`.

    Ranks that keep waiting once their watchdog fired (``TORCH_NCCL_ASYNC_ERROR_HANDLING=0``)
    sit hung until the limit ends them: more time would not have helped, so the state is no
    fallback root for them. Nor is a cancellation or a preemption: someone, or the
    scheduler, stopped a job that had hung half an hour before, and what hung it is the
    question. Without a log root the verdict is
    ``unknown.symptoms_only``, its evidence the timeouts and the rank they waited for
    (``straggler.py``)."""
    timed_out = attempts.filter(pl.col("state").is_in(ENDED_HUNG_STATES)).select("attempt_id", "end_ts").join(
        coverage.select("attempt_id", *PROGRESS_COLUMNS), on="attempt_id", how="left")
    if timed_out.is_empty():
        return timed_out.select("attempt_id")
    reports = events.filter((pl.col("role") == "cascade") & reports_timeout()).select("attempt_id", "ts_hi")
    return (
        reports.join(timed_out.with_columns(stalled().alias("_stalled")), on="attempt_id")
        .group_by("attempt_id").agg(pl.col("ts_hi").min(), pl.col("end_ts").first(), pl.col("_stalled").first())
        .filter((pl.col("ts_hi") < pl.col("end_ts") - HUNG_BEFORE_LIMIT) | pl.col("_stalled"))
        .select("attempt_id")
    )


def demote_outworked_roots(events: pl.DataFrame, coverage: pl.DataFrame, fail_at_once: timedelta) -> pl.DataFrame:
    """Root candidates the attempt went on working after become ``context``.

    ``coverage``: per attempt, with :data:`PROGRESS_COLUMNS`. An attempt whose progress
    reports (a stamped step and its loss) went on more than ``fail_at_once`` after a root
    candidate could have been printed (its ``ts_hi``, or its last repeat's stamp for a
    flood: a CPU throttled all run never passed) trained through that fault: another
    user's GPU on a shared node falling off the bus, one GSP timeout of a monitoring
    ``nvidia-smi`` call. When another root candidate was printed more than ``fail_at_once``
    after it, that one ended the attempt (a CUDA out-of-memory error 40 minutes later) and
    the earlier fault is context; with none after it, nothing else explains the failure
    and the fault stays (as :func:`engine.relabel.demote_outlived_roots` keeps a fault that
    passes by itself). Progress is the attempt's as a whole: a collective job only reports a
    step its every rank took. A fault that only slows a job
    (:func:`engine.rules.python_rules.slows_the_job`) is one it goes on reporting through:
    never outworked."""
    root = pl.col("role") == "root_candidate"
    outworkable = root & ~slows_the_job()
    progress = coverage.select("attempt_id", "last_progress").drop_nulls()
    if progress.is_empty() or not events.select(root.any()).item():
        return events
    # A fault repeated (a flood's ``last_ts``: a CPU throttled all run) lasted until its
    # last repeat: the job went on working through it only if it went on past that.
    roots = events.filter(root).select(
        "_row", "attempt_id", "ts", pl.max_horizontal("ts_hi", "last_ts").alias("_lasted"),
        outworkable.alias("_outworkable"),
    ).join(progress, on="attempt_id")
    last_root = roots.group_by("attempt_id").agg(pl.col("ts").max().alias("_last_root"))
    since = pl.col("_lasted") + fail_at_once
    outworked = (
        roots.join(last_root, on="attempt_id")
        .filter(pl.col("_outworkable") & (pl.col("last_progress") > since) & (pl.col("_last_root") > since))["_row"]
    )
    return with_role(events, pl.col("_row").is_in(outworked.implode()), "context")


def outage_rivals(events: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` and ``_rival``: the latest moment (``ts_hi``: an unstamped CUDA error
    lies anywhere up to the next stamp) a root candidate of each attempt that is no outage
    (:func:`engine.outages.outage`) may have been printed, one that could explain its
    failure instead of an outage. The scheduler's end of the job (:data:`LATE_ENDS`) is no
    rival: it explains when the job stopped, not why it failed."""
    rival = (pl.col("role") == "root_candidate") & outage(down=True).is_null() & ~pl.col("cause").is_in(LATE_ENDS)
    return events.filter(rival).group_by("attempt_id").agg(pl.col("ts_hi").max().alias("_rival"))


def demote_survived_outages(events: pl.DataFrame, coverage: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """Recovered outages the attempt reported progress after become ``context``, beside a
    root candidate that may have been printed after that progress.

    A port that went down and came back up (a Lustre connection lost and restored, an NFS
    server back), followed by a progress report stamped after it was back (more than
    ``skew`` after: the report's node clock may differ), did not break the job: a flap that
    had broken its traffic leaves every collective after it hung, and no step is taken.
    When another root candidate (not an outage, not the scheduler's end of the job,
    :data:`LATE_ENDS`) may have been printed after that report (its ``ts_hi``: an
    unstamped CUDA out-of-memory traceback lies anywhere up to the next stamp), it ended
    the attempt, however soon after the bounce (too soon for
    :func:`engine.relabel.demote_recovered_outages`, which waits two minutes). An outage whose node's errors were tied
    to it as their confirmations (NCCL's ``NET/IB`` retry errors) stays: the job felt it.
    ``coverage``: per attempt, with :data:`PROGRESS_COLUMNS`; ``events`` with ``_row``."""
    root = pl.col("role") == "root_candidate"
    is_down = outage(down=True).is_not_null() & root
    progress = coverage.select("attempt_id", "last_progress").drop_nulls()
    if progress.is_empty() or not events.select(is_down.any()).item():
        return events
    downs = events.filter(is_down).with_columns(outage(down=True))
    survived = (
        _recovered_unconfirmed(events, downs)
        .join(progress, on="attempt_id")
        .join(outage_rivals(events), on="attempt_id")
        .filter((pl.col("_up") + skew < pl.col("last_progress")) & (pl.col("_rival") > pl.col("last_progress")))
        ["_row"]
    )
    return with_role(events, pl.col("_row").is_in(survived.implode()), "context")


def _recovered_unconfirmed(events: pl.DataFrame, downs: pl.DataFrame) -> pl.DataFrame:
    """The outages of ``downs`` a recovery closed (:func:`engine.outages.closed`), on nodes
    where no error of ``events`` was tied to them as a confirmation
    (:func:`engine.outages.confirmed`): outages the job came through without saying so."""
    return closed(downs, recoveries(events)).join(confirmed(events, downs), on=["attempt_id", "node"], how="anti",
                                                   nulls_equal=True)


def demote_unfelt_flaps(events: pl.DataFrame) -> pl.DataFrame:
    """A port that went down and came back up within the attempt, which no network symptom
    the job printed was tied to (no ``NET/IB`` error named it, no collective hung on it),
    becomes ``context`` beside the job's own error on another node
    (a loss gone NaN, an out-of-memory error, an exception). A flap that broke the job's
    traffic leaves NCCL's errors or the watchdogs' timeouts behind; one that left none did
    not end the job, and the error, which a link elsewhere cannot cause, did (a management
    port bouncing while rank 0 found a NaN in its gradients). Beside a hardware fault
    elsewhere the flap stays a rival: a collective already hung on a dead GPU carries no
    traffic whose errors would show the flap broke it. ``events`` with ``_row``."""
    root = pl.col("role") == "root_candidate"
    is_link = (outage(down=True) == "link") & root
    if not events.select(is_link.any()).item():
        return events
    downs = events.filter(is_link).with_columns(outage(down=True))
    # Only the network's own symptoms say the job felt it: a teardown (torchrun's SIGTERM
    # fan-out, srun's task exit) is linked to the earliest root whatever ended the job.
    felt = events.filter(pl.col("caused_by").is_not_null() & (pl.col("domain") == "network")).select(
        "attempt_id", pl.col("caused_by").alias("event_id"))
    rivals = events.filter(root & (pl.col("domain") == "workload") & pl.col("node").is_not_null()).select(
        "attempt_id", pl.col("node").alias("_rival_node"))
    unfelt = (
        _recovered_unconfirmed(events, downs)
        .join(felt, on=["attempt_id", "event_id"], how="anti")
        .join(rivals, on="attempt_id")
        .filter(pl.col("_rival_node") != pl.col("node"))
        ["_row"]
    )
    return with_role(events, pl.col("_row").is_in(unfelt.implode()), "context")


CLOCK_OFFSET_RULE = "clock_offset"
"""The rule id of the engine's notes that a node's lines were moved by its clock's offset
(:func:`engine.correlate.clock_offsets`): kept with the roots, whose times they explain."""

EVIDENCE_DTYPE = pl.from_arrow(pa.array([], EVIDENCE)).dtype
ALTERNATIVE_DTYPE = pl.from_arrow(pa.array([], ALTERNATIVE)).dtype
_EVIDENCE_FIELDS = [f.name for f in EVIDENCE]
_ALTERNATIVE_FIELDS = [f.name for f in ALTERNATIVE]


def _sorted_unique(column: str, where: pl.Expr | None = None) -> pl.Expr:
    values = pl.col(column) if where is None else pl.col(column).filter(where)
    return values.drop_nulls().unique().sort()


SUSPECT_WORKLOAD_CAUSES = (*GPU_FAULT_CAUSES, "workload.cuda_oom")
"""Workload causes whose node is a suspect beside a competing explanation: a GPU fault's
look-alikes, and a CUDA out-of-memory error (a failing GPU's first word). Any other program
error (a ``ValueError``, a missing file) is the code's wherever it ran: its node is no
suspect."""


def names_suspects() -> pl.Expr:
    """Whether a root candidate's node, GPU and port are suspects when explanations compete:
    any but a workload one outside :data:`SUSPECT_WORKLOAD_CAUSES`."""
    return (pl.col("domain") != "workload") | pl.col("cause").is_in(SUSPECT_WORKLOAD_CAUSES)


SHARED_WINDOW = timedelta(minutes=10)
"""How close to an attempt's root another node's report of the same shared service must be
to make it the service's failure (the run's other attempts included)."""
SERVICE_PARAMS = ("target", "evictor", "server", "mds", "daemon")
"""Params that name the shared service an event is about, in order of preference."""


def _service() -> pl.Expr:
    """The shared service an event names (its first :data:`SERVICE_PARAMS` value), if any."""
    return pl.coalesce(pl.col("params").str.extract(rf'"{key}": ?"([^"]*)"', 1) for key in SERVICE_PARAMS)


def _several_clients() -> pl.Expr:
    """In an aggregation of a shared service's reports (with ``_node_log``): whether more
    than one node reported it, counting only the node logs' reports where there are any
    (:func:`select_root_cause`)."""
    node_log = pl.col("_node_log")
    return (
        pl.when(node_log.any()).then(pl.col("node").filter(node_log).n_unique() > 1)
        .otherwise(pl.col("node").n_unique() > 1).alias("_shared")
    )


STUCK_S = r'"(?:stuck|blocked)_s": ?"?([0-9]+)'
"""How long a report says its fault had lasted, from a params JSON object (a soft lockup's
``stuck_s``, "stuck for 74s"; a hung task's ``blocked_s``, "blocked for more than 122
seconds", the time since the task last ran), as group 1."""


def onset() -> pl.Expr:
    """When an event's fault began: its stamp, less the time a report says the fault had
    lasted by then (:data:`STUCK_S`: the kernel reports a CPU stuck for 74 s when it has
    been stuck that long, a task blocked for more than 122 s when it last ran that long ago)."""
    stuck = pl.col("params").str.extract(STUCK_S, 1).cast(pl.Int64, strict=False).fill_null(0)
    return pl.col("ts") - pl.duration(seconds=stuck)


STORY_KEY = ["attempt_id", "node", "domain", "event_id"]
"""How a root candidate meets the confirmations of its node and domain linked to it
(:func:`story_began`)."""


def story_began(events: pl.LazyFrame, moment: pl.Expr) -> pl.LazyFrame:
    """Per root candidate the precedence rules made the end of a story its node began
    earlier (a local disk disabled after its own command timeouts, their ``confirmation``,
    of its domain: :data:`STORY_KEY`), ``_began``: the earliest ``moment`` of those reports."""
    return (
        events.filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
        .select("attempt_id", "node", "domain", pl.col("caused_by").alias("event_id"), moment.alias("_began"))
        .group_by(STORY_KEY).agg(pl.col("_began").min())
    )


def select_root_cause(
    events: pl.DataFrame, config: EngineConfig, naming: pl.DataFrame | None = None,
    idle: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per attempt: the root event, its culprits, and competing alternatives.

    ``events`` are correlated events (one row per attempt × event) with ``_row``, each
    row's index. ``idle``: extracted events of the same days that no attempt holds (node
    lines outside every attempt's window, as the events table keeps them): a shared
    service's other clients include the nodes that ran no job then. Returns one row per
    attempt that has a root candidate: ``root_event_id``, ``root_ts``, ``domain``,
    ``cause``, ``root_action`` (the root's, or :data:`REPLACE_GPU` when an event of the same
    incident asks for it), ``culprit_*`` lists, ``root_rows``
    (the ``_row`` of the culprit events), ``names_node`` (false when the culprit events'
    rules say the nodes are not at fault: ``naming`` is
    :meth:`engine.rules.loader.RulePack.node_naming`), ``alternatives`` (list of structs)
    and ``alternative_nodes`` / ``alternative_gpus`` / ``alternative_ports`` (the competing
    candidates' units).
    """
    skew = timedelta(seconds=config.seconds("clock_skew"))
    tie = timedelta(seconds=config.seconds("tie_window"))
    # Order by the latest moment each candidate can have happened (``ts_hi``): a precisely
    # stamped line beats an unstamped one that only inherited an earlier stamp.
    # Two lines of one file are ordered by their line numbers whatever their stamps say.
    # An attempt with no candidate before its end may still have one stamped within its
    # grace: an infrastructure fault on a node whose clock runs ahead (the job died of it
    # at once; the node's kernel stamped it later than the scheduler's end), or the job's
    # own output stamped so (a process prints nothing once its job has ended: the stamp is
    # its node's clock running ahead). Taken only then, and never ``definitive``.
    late = pl.col("ts") > pl.col("end_ts") + skew
    infrastructure = pl.col("domain").is_in(INFRASTRUCTURE)
    # A root the precedence rules made the end of a story its node began earlier is dated
    # from the first report of that story (the latest moment each can have happened), to be
    # ordered against the faults of other nodes; ``_reported_hi`` keeps its own moment.
    began = story_began(events.lazy(), pl.col("ts_hi"))
    # Lazy: the candidates' few columns are gathered, never the wide rows (the log text).
    candidates = (
        events.lazy()
        .filter((pl.col("role") == "root_candidate") & (~late | infrastructure | (pl.col("source") == "app")))
        .select("_row", "attempt_id", "cluster", "event_id", "ts", "ts_hi", "end_ts", "node", "gpu", "port", "rank",
                "domain", "cause", "action", "rule_id", "event", "origin", "params", "ts_source", "source")
        .filter(~late | late.all().over("attempt_id"))
        # Of those stamped that late, an infrastructure fault outranks the job's own report
        # of it (the precedence rules, which would say so, leave late lines alone).
        .filter(~late | infrastructure | ~(late & infrastructure).any().over("attempt_id"))
        .join(began, on=STORY_KEY, how="left", maintain_order="left")
        .with_columns(
            pl.col("ts_hi").alias("_reported_hi"),
            pl.min_horizontal("ts_hi", "_began").alias("ts_hi"),
            pl.min_horizontal("ts", "_began").alias("ts"),
        )
        .drop("_began")
        .with_columns(*origin_position(), onset().alias("_onset"))
        .sort(["attempt_id", "ts_hi", "ts", "_file", "_line", "node", "rule_id", "event_id"], nulls_last=True)
        .collect()
    )
    first = candidates.group_by("attempt_id", maintain_order=True).first().select(
        "attempt_id",
        pl.col("event_id").alias("root_event_id"),
        pl.col("ts").alias("root_ts"),
        pl.col("ts_hi").alias("root_ts_hi"),
        pl.col("_reported_hi").alias("root_reported_hi"),
        pl.col("node").alias("root_node"),
        pl.col("domain").alias("root_domain"),
        pl.col("cause").alias("root_cause"),
        pl.col("action").alias("root_action"),
        pl.col("_file").alias("root_file"),
        pl.col("_line").alias("root_line"),
        pl.col("cluster").alias("root_cluster"),
        late.alias("root_late"),
        param(UNDECIDED_PARAM).is_not_null().alias("root_undecided"),
        param(RIVAL_PARAM).alias("root_rival"),
        (pl.col("source") == "app").alias("root_printed_by_job"),
    )
    # A hardware fault on a workload root's node stamped after the attempt ended (within its
    # grace) may be what the job died of, seen by a clock that runs ahead: the CUDA error
    # of a GPU that was falling off the bus. The root stands, but not as ``definitive``.
    late_hardware = (
        events.lazy()
        .filter((pl.col("role") == "root_candidate") & late & pl.col("domain").is_in(INFRASTRUCTURE))
        .select("attempt_id", pl.col("node").alias("root_node"), late_rival=pl.lit(True))
        .unique()
        .collect()
    )
    first = first.join(late_hardware, on=["attempt_id", "root_node"], how="left").with_columns(
        (pl.col("late_rival").fill_null(False) & (pl.col("root_domain") == "workload")).alias("late_rival")
    )
    paired = candidates.join(first.drop("late_rival"), on="attempt_id").with_columns(
        same_node=pl.col("node").is_not_null() & (pl.col("node") == pl.col("root_node")).fill_null(False)
    )
    close = pl.col("ts_hi") - pl.col("root_ts_hi") <= pl.when(pl.col("same_node")).then(pl.lit(tie)).otherwise(pl.lit(skew))
    # A line of another node known only within [ts, ts_hi] (an unstamped traceback between
    # two stamped lines) that spans the root's moment may have come before the root or after
    # it: no clock orders the two, so in another domain it is a competing explanation too.
    # On the root's own node (or on an unknown one) it may be the root's local consequence
    # (a CUDA error of the GPU that fell off, a stale NFS handle behind a link that went
    # down), so there it competes only when close.
    # On the root's own node, an unstamped report of the same domain whose span holds the
    # root's moment is the same incident seen by the process (Python's faulthandler on the
    # rank whose process the kernel reports as segfaulting): its rank and GPU are culprits.
    # So is an unstamped report of the root's very cause that names no node (slurmstepd's
    # count of the OOM kills the kernel reported).
    spans = (pl.col("ts") <= pl.col("root_ts")) & (pl.col("ts_hi") >= pl.col("root_ts"))
    nodeless_report = pl.col("node").is_null() & (pl.col("cause") == pl.col("root_cause"))
    # A fault a rule placed between nodes without telling which (UNDECIDED_PARAM) is one
    # incident on all of them, whenever each reported it.
    undecided = pl.col("root_undecided") & param(UNDECIDED_PARAM).is_not_null() & (pl.col("cause") == pl.col("root_cause"))
    other_node = pl.col("node").is_not_null() & pl.col("root_node").is_not_null() & ~pl.col("same_node")
    # A report of another node printed after the root that says how long its fault had
    # lasted by then (a CPU "stuck for 48s") began before the root may have: it was under
    # way when the root struck, and no clock orders the two. In the root's domain it is the
    # same incident on a second node (two nodes' CPUs stalled at once); in another, a rival.
    under_way = other_node & (pl.col("ts") >= pl.col("root_ts")) & (pl.col("_onset") <= pl.col("root_ts_hi") + skew)
    same_incident = paired.filter(
        close | ((pl.col("same_node") | nodeless_report) & spans) | undecided
        | (under_way & (pl.col("domain") == pl.col("root_domain")))
    )
    # One printed after a report of the root in that report's file (a job output's NCCL
    # teardown below slurmstepd's time-limit banner, or below its count of the OOM kill the
    # kernel's log holds) came after the root, whichever node it names.
    reported = (
        same_incident.filter(pl.col("domain") == pl.col("root_domain"))
        .group_by("attempt_id", "_file").agg(pl.col("_line").min().alias("_reported_line"))
    )
    paired = paired.join(reported, on=["attempt_id", "_file"], how="left", nulls_equal=True)
    below_root = (pl.col("_line") > pl.col("_reported_line")).fill_null(False)
    spans_root = other_node & ~below_root & (pl.col("ts") <= pl.col("root_ts")) & (pl.col("ts_hi") > pl.col("root_ts"))
    # A candidate a rule found competing with the faults beside it (RIVAL_PARAM) whose span,
    # widened by the skew, holds the root's moment, on the root's node too; or whatever its
    # moment, when the rule paired it with the root itself, for the same reason (a row the
    # GPU marked for remapping and the NaN a rank found seconds later).
    marked = param(RIVAL_PARAM).is_not_null() & (
        ((pl.col("ts") - skew <= pl.col("root_ts_hi")) & (pl.col("ts_hi") + skew >= pl.col("root_ts")))
        | (param(RIVAL_PARAM) == pl.col("root_rival")).fill_null(False))
    # A fault of another node that struck while the root's story was under way (between the
    # first report of a disk timing out and its disabling, and up to the skew after) is one
    # the root does not explain: both were failing at once.
    during_story = other_node & (pl.col("ts_hi") <= pl.col("root_reported_hi") + skew)
    rivals = paired.filter(close | spans_root | under_way | marked | during_story)
    if naming is None or naming.is_empty():
        naming = pl.DataFrame(schema={"rule_id": pl.String, "event": pl.String, "names_node": pl.String})
    names = pl.col("names_node")
    # A shared service (``alone``) that several nodes report with the root's cause is the
    # service's failure, not a node's: several nodes of the attempt at any time of it
    # (clients notice a dead server at their own pace), or other nodes within
    # :data:`SHARED_WINDOW` of the root, those of the run's other attempts or of none (the
    # same storage target evicting the clients of three jobs and of the idle nodes that
    # mount it), as a root candidate or as context (a client that lost its session and got
    # it back still saw the service go).
    #
    # The clients' own reports are the node logs' (the kernel's): where any node's log
    # reports it, the nodes whose logs do are the ones counted and named. The job's output
    # may print one client's error on every node (a distributed checkpoint gathers each
    # rank's exception and raises them all everywhere).
    alone = naming.filter(names == "alone")
    service_report = pl.col("rule_id").is_in(alone["rule_id"].implode()) & pl.col("role").is_in(["root_candidate", "context"])
    node_log = pl.col("source").is_in(NODE_LOG_SOURCES)
    reported = ["cluster", "rule_id", "event", "cause", "node", "ts", _service().alias("_service"), node_log.alias("_node_log")]
    reports = events.lazy().filter(service_report & (pl.col("ts") <= pl.col("end_ts") + skew)).select(
        "attempt_id", *reported).collect().join(alone, on=["rule_id", "event"], how="semi")
    idle_reports = (
        idle.lazy().filter(service_report & pl.col("attempt_id").is_null()).select(reported).collect()
        .join(alone, on=["rule_id", "event"], how="semi") if idle is not None else reports.drop("attempt_id").head(0)
    )
    root_service = candidates.select("event_id", _service().alias("root_service")).unique("event_id")
    roots = first.select("attempt_id", "root_event_id", "root_cause", "root_ts", "root_cluster").join(
        root_service, left_on="root_event_id", right_on="event_id", how="left")
    # The same service: the same Lustre target, NFS server or MDS, or both naming none (the
    # attempt's clients losing another target half an hour before say nothing of this one).
    same_service = pl.col("_service").eq_missing(pl.col("root_service"))
    in_attempt = (
        reports.join(roots, on="attempt_id")
        .filter((pl.col("cause") == pl.col("root_cause")) & same_service)
        .group_by("attempt_id")
        .agg(_several_clients())
    )
    in_fleet = (
        pl.concat([reports.select(idle_reports.columns), idle_reports])
        .select("cluster", "cause", "node", "ts", "_service", "_node_log").unique()
        .join(roots, left_on=["cluster", "cause"], right_on=["root_cluster", "root_cause"])
        .filter(((pl.col("ts") - pl.col("root_ts")).abs() <= SHARED_WINDOW) & same_service)
        .group_by("attempt_id")
        .agg(_several_clients())
    )
    shared = pl.concat([in_attempt, in_fleet]).group_by("attempt_id").agg(pl.col("_shared").any())
    culprits = (
        same_incident.filter(pl.col("domain") == pl.col("root_domain"))
        .join(naming, on=["rule_id", "event"], how="left")
        .group_by("attempt_id")
        .agg(
            # A line that never names its node (slurmstepd's "DUE TO NODE FAILURE" banner,
            # printed on the batch host) adds none beside one that does.
            # A shared service's report from the job's output names no node beside a node
            # log's report of it (see above).
            pl.col("node").filter(
                (names.fill_null("") != "never")
                & ~((names == "alone") & ~node_log & ((names == "alone") & node_log).any()).fill_null(False)
            ).drop_nulls().unique().sort().alias("culprit_nodes"),
            _sorted_unique("gpu").alias("culprit_gpus"),
            _sorted_unique("port").alias("culprit_ports"),
            _sorted_unique("rank").alias("culprit_ranks"),
            pl.col("_row").alias("root_rows"),
            (pl.col("action") == REPLACE_GPU).any().alias("_replace"),
            (names == "never").fill_null(False).all().alias("_never"),
            # A fault of a component several nodes share (``one_node``: a multi-node NVLink
            # domain's switch trays) that struck several of them at once is the component's.
            ((names == "one_node").fill_null(False).all() & (pl.col("node").drop_nulls().n_unique() > 1))
            .alias("_spread"),
        )
        # Culprit events that all never name their node (a job's own cgroup OOM, seen by
        # the kernel and by slurmstepd), a shared service reported from several nodes, or a
        # shared component's fault seen on several at once, leave the nodes out; one event
        # that does name its node (a node-wide OOM kill beside slurmstepd's count of it)
        # keeps its own.
        .join(shared, on="attempt_id", how="left")
        .with_columns(~(pl.col("_never") | pl.col("_shared").fill_null(False) | pl.col("_spread")).alias("names_node"))
        .drop("_never", "_shared", "_spread")
    )
    # Printed after the root in the same node's file: not a rival (one writer's lines are in
    # order). A central syslog server's file holds many nodes, whose order there is only
    # the order the lines arrived in, queued and forwarded at each node's pace; a job's
    # output is written as srun receives its tasks' lines, within moments, so below the root
    # there a line came after it (slurmstepd's requeue banner below srun's "Node failure
    # on"), and so did an unstamped line anywhere, which has no time of its own, only its
    # place (NCCL's teardown below slurmstepd's banner, whose stamp the scheduler's end
    # bounds within the clock skew).
    after_root = below_root & (
        pl.col("same_node") | (pl.col("ts_source") == "inferred") | (pl.col("source") == "app")
    )
    competing = (
        rivals.filter((pl.col("domain") != pl.col("root_domain")) & ~after_root)
        .join(alone.select("rule_id", "event", _alone=pl.lit(True)), on=["rule_id", "event"], how="left")
        .sort(["attempt_id", "ts", "node", "rule_id"], nulls_last=True)
    )
    # A shared service's failure that several nodes report (a file server every client
    # lost) is a rival on none of them: its clients are no suspects, as beside it as root.
    shared_rival = pl.col("_alone").fill_null(False) & (pl.col("node").n_unique().over("attempt_id", "cause") > 1)
    # One fault the driver reports twice (XID 79 and NVRM's "fallen off the bus") is one
    # alternative; the GPUs and ports of every rival are suspects all the same.
    alternatives = (
        competing.unique(["attempt_id", "domain", "cause", "node"], keep="first", maintain_order=True)
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.struct(_ALTERNATIVE_FIELDS).alias("alternatives"))
        .join(competing.with_columns(shared_rival.alias("_shared_rival")).group_by("attempt_id").agg(
            _sorted_unique("node", names_suspects() & ~pl.col("_shared_rival")).alias("alternative_nodes"),
            _sorted_unique("gpu", names_suspects()).alias("alternative_gpus"),
            _sorted_unique("port", names_suspects()).alias("alternative_ports"),
        ), on="attempt_id")
    )
    return (
        first.join(culprits, on="attempt_id", how="left")
        .join(alternatives, on="attempt_id", how="left")
        .rename({"root_domain": "domain", "root_cause": "cause"})
        .with_columns(pl.when(pl.col("_replace").fill_null(False)).then(pl.lit(REPLACE_GPU))
                      .otherwise(pl.col("root_action")).alias("root_action"))
        .drop("root_node", "root_ts_hi", "root_reported_hi", "root_file", "root_line", "root_cluster", "_replace")
    )


def state_table(state_rules) -> pl.DataFrame:
    """One row per normalized state a ``state`` rule covers (the first rule wins):
    ``state``, ``rule_id``, ``event``, ``domain``, ``cause``, ``action``, ``names_node``,
    ``agrees_with``."""
    columns = ("rule_id", "event", "domain", "cause", "action", "names_node")
    return pl.DataFrame(
        [{"state": state, "rule_id": r.id, "event": r.event, "domain": r.domain, "cause": r.cause,
          "action": r.action, "names_node": r.names_node or "always", "agrees_with": r.agrees_with}
         for r in state_rules for state in r.states],
        schema={"state": pl.String, **{c: pl.String for c in columns}, "agrees_with": pl.List(pl.String)},
    ).unique("state", keep="first", maintain_order=True)


def state_fallback(attempts: pl.DataFrame, state_rules) -> pl.DataFrame:
    """Per attempt: the cause its scheduler state implies, from the pack's ``state`` rules.

    Returns ``attempt_id``, ``state_domain``, ``state_cause``, ``state_action``,
    ``state_names_node``, ``state_rule_id``, ``state_event``, ``state_agrees_with`` for
    attempts whose state some rule covers.
    """
    table = state_table(state_rules)
    table = table.rename({c: f"state_{c}" for c in table.columns if c != "state"})
    return attempts.select("attempt_id", "state").join(table, on="state", how="inner").drop("state")


def _evidence(events: pl.DataFrame, roots: pl.DataFrame, limit: int, notes: tuple[str, ...]) -> pl.DataFrame:
    """Per attempt: the evidence list (non-benign events). When trimming, roots first, with
    the engine's and the python rules' own inferences (``notes`` rule ids: a rank that never
    joined the collective 63 others timed out in must not be crowded out by their reports);
    then the first event of each rule before the second of any (by role, then time), so
    that a flood of one rule's lines (every rank's watchdog report) does not crowd out the
    one line of another (a filesystem a demoted report says was lost).

    ``events`` has ``_row``, each row's index. Which rows to keep, and their order, are
    worked out on a narrow frame; the evidence fields are gathered once, for the kept rows.
    """
    root_rows = roots.select(pl.col("root_rows").alias("_row")).explode("_row").with_columns(is_root=pl.lit(True))
    rows = (
        events.select("_row", "attempt_id", "role", "ts", "node", "origin", "rule_id")
        .filter(pl.col("role") != "benign")
        .with_columns((pl.len().over("attempt_id") > limit).alias("_trim"))
    )
    # Only attempts with more events than the limit are ranked (few: most keep every event).
    trimmed = (
        rows.filter("_trim")
        .join(root_rows, on="_row", how="left")
        .sort(["attempt_id", "ts", "node", "origin"], nulls_last=True)
        .with_columns(
            (pl.col("is_root").fill_null(False) | pl.col("rule_id").is_in(notes)).alias("is_root"),
            pl.col("role").replace_strict(ROLE_ORDER, default=9, return_dtype=pl.Int32).alias("_order"),
            pl.int_range(pl.len(), dtype=pl.UInt32).over("attempt_id", "rule_id").alias("_nth"),
        )
        .sort(["attempt_id", "is_root", "_nth", "_order", "ts", "node", "origin"],
              descending=[False, True, False, False, False, False, False], nulls_last=True)
        .group_by("attempt_id", maintain_order=True)
        .head(limit)
        .select(rows.columns)
    )
    kept = pl.concat([rows.filter(~pl.col("_trim")), trimmed]).sort(
        ["attempt_id", "ts", "node", "origin", "rule_id"], nulls_last=True)
    fields = events.select(_EVIDENCE_FIELDS)[kept["_row"]]
    return (
        pl.concat([kept.select("attempt_id"), fields], how="horizontal")
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.struct(_EVIDENCE_FIELDS).alias("evidence"))
    )


def decide(
    attempts: pl.DataFrame,
    events: pl.DataFrame,
    coverage: pl.DataFrame,
    pack: RulePack,
    config: EngineConfig,
    idle: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The verdicts: one row per attempt with the results columns (minus run id/time).

    ``attempts``: the scoped attempts (+ ``cluster``). ``events``: correlated, re-labelled
    events. ``coverage``: ``attempt_id``, ``coverage`` (list of structs) and
    ``coverage_complete`` (bool), and the attempt's progress reports where known
    (:data:`PROGRESS_COLUMNS`: a cancellation, a preemption or a time limit that ended a job
    which had :func:`stalled`, or a time limit or a cancellation that ended one which had
    :func:`slowed`, is
    ``insufficient``, action ``investigate``: it only stopped a job no longer working, or no
    longer working at its pace, and nothing says why).
    ``pack``: its state rules give the fallback roots, its outcomes' ``names_node`` which
    roots name no culprit node. ``idle``: the extracted
    events the attempts were correlated from, whose lines no attempt holds are read for
    other clients of a shared service (:func:`select_root_cause`).
    """
    # One integer key per (attempt, event) row: the evidence finds its roots by it.
    events = events.with_row_index("_row")
    coverage = with_progress(coverage)
    events = demote_outworked_roots(events, coverage, timedelta(seconds=config.seconds("fail_at_once")))
    events = demote_survived_outages(events, coverage, timedelta(seconds=config.seconds("clock_skew")))
    events = demote_unfelt_flaps(events)
    roots = select_root_cause(events, config, pack.node_naming(), idle)
    fallback = state_fallback(attempts, pack.state).join(
        hung_before_the_end(events, attempts, coverage), on="attempt_id", how="anti")
    # A symptom linked to any of the reports the root stands for corroborates it: the driver
    # prints XID 79 and its plain "fallen off the bus" line at one instant, and the cascades
    # may link to the one the root is not.
    reports = roots.select("attempt_id", "root_rows").explode("root_rows").drop_nulls("root_rows")
    reports = reports.select("attempt_id", events["event_id"].gather(reports["root_rows"]))
    links = (
        events.filter(pl.col("caused_by").is_not_null())
        .select("attempt_id", pl.col("caused_by").alias("event_id"), "role", "rank", "node", "domain")
        .join(reports, on=["attempt_id", "event_id"], how="semi")
    )
    # The scheduler's and the launchers' teardown (srun's "task 3: Exited with exit code 1",
    # torchrun's ChildFailedError, a SIGTERM sent) follows any failure alike: it says which
    # process ended, not why. It corroborates an error the job printed itself (the process
    # that printed it is the one that exited), not a fault a node's log reports.
    linked = links.group_by("attempt_id").agg(
        (pl.col("domain") != "scheduler").any().alias("linked"), pl.lit(True).alias("_any_link"))
    # A root that names no rank (the kernel's XID 13) is the rank's whose own error confirms
    # it: the same fault, seen by the process that hit it. Those ranks join the culprit
    # ranks of the root's incident (another node's ranks hitting the same error), but only a
    # rank on a culprit node: the survivors' reports of a node that died are not the fault's.
    culprit_nodes = roots.select("attempt_id", pl.col("culprit_nodes").alias("node")).explode("node")
    confirming_ranks = (
        links.filter((pl.col("role") == "confirmation") & pl.col("rank").is_not_null())
        .join(culprit_nodes, on=["attempt_id", "node"], how="semi")
        .group_by("attempt_id")
        .agg(_sorted_unique("rank").alias("_confirming_ranks"))
    )
    symptoms = (
        events.filter(pl.col("role").is_in(["cascade", "confirmation"]))
        .group_by("attempt_id")
        .agg(_sorted_unique("node").alias("affected_nodes"), pl.len().alias("n_symptoms"))
    )
    notes = (CLOCK_OFFSET_RULE, *(loaded.rule.id for loaded in pack.python))
    evidence = _evidence(events, roots, config.evidence_limit, notes)

    frame = (
        attempts.join(roots, on="attempt_id", how="left")
        .join(fallback, on="attempt_id", how="left")
        .join(linked, on="attempt_id", how="left")
        .join(confirming_ranks, on="attempt_id", how="left")
        .with_columns(
            pl.when(pl.col("_confirming_ranks").is_null()).then(pl.col("culprit_ranks"))
            .otherwise(pl.concat_list(pl.col("culprit_ranks").fill_null(pl.lit([], dtype=pl.List(pl.Int32))),
                                      "_confirming_ranks").list.unique().list.sort())
            .alias("culprit_ranks")
        )
        .drop("_confirming_ranks")
        .join(symptoms, on="attempt_id", how="left")
        .join(evidence, on="attempt_id", how="left")
        .join(coverage, on="attempt_id", how="left")
        .with_columns(
            failed=pl.col("state").is_in(FAILED_STATES),
            # A root that is only the scheduler's own teardown (a requeue or cancel banner)
            # of an attempt Slurm recorded as lost to its node yields to that state, unless
            # the state's rule agrees with it (someone set the node DOWN: NODE_FAIL is what
            # follows); so does a cancellation that gives no reason (slurmstepd's bare
            # "CANCELLED AT" banner) to a scheduler state that does (DEADLINE, TIMEOUT,
            # PREEMPTED).
            has_root=pl.col("root_event_id").is_not_null()
            & ~((pl.col("domain") == "scheduler") & pl.col("state_domain").is_in(INFRASTRUCTURE)
                & ~pl.col("state_agrees_with").list.contains(pl.col("cause"))).fill_null(False)
            & ~((pl.col("cause") == REASONLESS_CANCEL) & (pl.col("state_domain") == "scheduler")
                & (pl.col("state_cause") != REASONLESS_CANCEL)).fill_null(False),
            has_fallback=pl.col("state_cause").is_not_null(),
            ambiguous=pl.col("alternatives").list.len().fill_null(0) > 0,
            # A linked symptom, the scheduler saying the same thing, or the scheduler losing
            # the node an infrastructure fault was found on, each corroborates the root.
            corroborated=pl.col("linked").fill_null(False)
            | (pl.col("_any_link").fill_null(False) & pl.col("root_printed_by_job").fill_null(False))
            | (pl.col("state_cause") == pl.col("cause")).fill_null(False)
            | pl.col("state_agrees_with").list.contains(pl.col("cause")).fill_null(False)
            | ((pl.col("state") == "node_fail") & pl.col("domain").is_in(INFRASTRUCTURE)).fill_null(False),
            complete=pl.col("coverage_complete").fill_null(False),
        )
    )
    log_root = pl.col("failed") & pl.col("has_root")
    by_state = pl.col("failed") & ~pl.col("has_root") & pl.col("has_fallback")
    domain = (
        pl.when(~pl.col("failed")).then(pl.lit("none"))
        .when(log_root).then(pl.col("domain"))
        .when(by_state).then(pl.col("state_domain"))
        .otherwise(pl.lit("unknown"))
    )
    cause = (
        pl.when(~pl.col("failed")).then(pl.lit("none"))
        .when(log_root).then(pl.col("cause"))
        .when(by_state).then(pl.col("state_cause"))
        .when(pl.col("n_symptoms").fill_null(0) > 0).then(pl.lit("unknown.symptoms_only"))
        .otherwise(pl.lit("unknown.no_evidence"))
    )
    # A job that slowed down until its time limit or someone's bare cancellation ended it,
    # or stopped reporting progress long before the limit, a cancellation or a preemption
    # ended it: the scheduler's end is why it stopped, nothing says why it slowed or stalled
    # (a GPU failing slowly prints no error). A preemption takes the nodes whatever the
    # job's pace: a slow job preempted was simply preempted.
    ended_idle = (log_root | by_state) & (
        (cause.is_in((TIME_LIMIT, REASONLESS_CANCEL)) & slowed()) | (cause.is_in(LATE_ENDS) & stalled()))
    quality = (
        pl.when(~pl.col("failed")).then(pl.lit("definitive"))
        .when(log_root & pl.col("ambiguous")).then(pl.lit("ambiguous"))
        .when(ended_idle).then(pl.lit("insufficient"))
        .when(log_root & pl.col("corroborated") & pl.col("complete") & ~pl.col("root_late") & ~pl.col("root_undecided")
              & ~pl.col("late_rival").fill_null(False))
        .then(pl.lit("definitive"))
        .when(log_root).then(pl.lit("probable"))
        .when(by_state & pl.col("complete")).then(pl.lit("probable"))
        .otherwise(pl.lit("insufficient"))
    )
    empty_str = pl.lit([], dtype=pl.List(pl.String))
    # A time limit or a preemption did not start on a node: policy verdicts name no culprit.
    # A workload fault is the job's own: it names the rank that failed, but no node, GPU or
    # port to take out of service, unless a competing explanation makes every suspect one.
    # Nor does a root whose rules say its nodes are not at fault (``names_node``), though a
    # competing explanation beside it still names its own suspects (a GPU off the bus a
    # second after the job's own cgroup OOM kill).
    blames_rank = log_root & (pl.col("_domain") != "scheduler")
    blames = blames_rank & ((pl.col("_domain") != "workload") | pl.col("ambiguous")) \
        & (pl.col("names_node").fill_null(True) | pl.col("ambiguous"))

    def only_failed(expr: pl.Expr, empty: pl.Expr, when: pl.Expr = blames) -> pl.Expr:
        return pl.when(when).then(expr.fill_null(empty)).otherwise(empty)

    def suspects(unit: str) -> pl.Expr:
        # With competing explanations every suspect node, GPU or port is a culprit until
        # ruled out; but the root's own only when its rules say its nodes may be at fault
        # (not the several clients of a shared server that went away, not a cgroup's kill),
        # and a program error's only when a failing GPU makes it too (:func:`names_suspects`).
        own = pl.when(pl.col("names_node").fill_null(True) & names_suspects()).then(pl.col(f"culprit_{unit}")) \
            .otherwise(empty_str)
        return (
            pl.when(pl.col("ambiguous"))
            .then(pl.concat_list(own, f"alternative_{unit}").list.drop_nulls().list.unique().list.sort())
            .otherwise(pl.col(f"culprit_{unit}"))
        )

    # A one-node attempt the scheduler lost to its node (NODE_FAIL, BOOT_FAIL) with no line
    # saying more had one suspect: its node. Not when the state's rule says the node is not
    # at fault (OUT_OF_MEMORY: the job outgrew its own memory limit).
    named_by_state = (
        by_state & pl.col("state_domain").is_in(INFRASTRUCTURE) & (pl.col("nodes").list.len() == 1)
        & (pl.col("state_names_node") != "never")
    )
    first_fault = pl.when(log_root).then(pl.col("root_ts")).when(by_state).then(pl.col("end_ts"))
    action = (
        pl.when(ended_idle).then(pl.lit(DEFAULT_ACTION["unknown"]))
        .when(log_root & (pl.col("root_action") != "none")).then(pl.col("root_action"))
        .when(by_state & (pl.col("state_action") != "none")).then(pl.col("state_action"))
        .otherwise(pl.col("_domain").replace_strict(DEFAULT_ACTION, return_dtype=pl.String))
    )
    # A host fault whose rule says the fix is the job's (it outgrew its own memory limit, its
    # /dev/shm) is the workload's responsibility, unless a rival explanation stands beside it.
    own_doing = (action == "fix_workload") & pl.col("_domain").is_in(INFRASTRUCTURE) & ~pl.col("ambiguous")
    return (
        frame.with_columns(domain.alias("_domain"), cause.alias("_cause"), quality.alias("quality"))
        .with_columns(
            pl.col("_domain").alias("domain"),
            pl.col("_cause").alias("cause"),
            pl.when(own_doing).then(pl.lit("workload"))
            .otherwise(pl.col("_domain").replace_strict(RESPONSIBILITY, return_dtype=pl.String)).alias("responsibility"),
            pl.when(named_by_state).then(pl.col("nodes").cast(pl.List(pl.String)))
            .otherwise(only_failed(suspects("nodes"), empty_str)).alias("culprit_nodes"),
            *(only_failed(suspects(unit), empty_str).alias(f"culprit_{unit}") for unit in ("gpus", "ports")),
            only_failed(pl.col("culprit_ranks"), pl.lit([], dtype=pl.List(pl.Int32)), blames_rank).alias("culprit_ranks"),
            pl.col("affected_nodes").fill_null(empty_str),
            first_fault.alias("first_fault_ts"),
            ((pl.col("end_ts") - first_fault).dt.total_microseconds() / 1e6).alias("fault_to_end_s"),
            pl.col("evidence").fill_null(pl.lit([], dtype=pl.List(EVIDENCE_DTYPE))),
            pl.when(log_root).then(pl.col("alternatives")).otherwise(None)
            .fill_null(pl.lit([], dtype=pl.List(ALTERNATIVE_DTYPE))).alias("alternatives"),
            action.alias("recommended_action"),
        )
        # One cause found on several nodes at once (two links down a second apart) is
        # certain, but not which of them broke the job, nor whether something they share
        # did; a node that stopped answering says nothing of why: such verdicts are
        # ``probable`` at most.
        .with_columns(
            pl.when((pl.col("quality") == "definitive")
                    & ((pl.col("culprit_nodes").list.len() > 1) | (pl.col("cause") == NODE_FAILURE)))
            .then(pl.lit("probable")).otherwise(pl.col("quality")).alias("quality"))
        .sort(["cluster", "end_ts", "attempt_id"], nulls_last=True)
    )
