"""The rank, or the node, that never joined the collective every other rank timed out in.

When every rank of a job but one reports a NCCL watchdog timeout, the missing rank is the
one the others waited for: its watchdog had nothing to time out, because it never entered
the collective. It was busy elsewhere — a rank-0-only step (data preparation, evaluation,
a checkpoint written by one rank) that outlasted the timeout, a stuck data loader — or
hung in Python. PyTorch names such a rank only with its desync debug on (``desync
report``, ``communication.yaml``); this rule reads the same fact off the timeouts.

Only attempts left without any root candidate get this event: it is an inference from
what is missing, so any line that names a fault outranks it. Rank 0 is where training
scripts do the work the others wait for (dataset preparation, evaluation, checkpoint
writing, ``if rank == 0`` blocks): a silent rank 0 becomes a ``workload`` root candidate.
Any other silent rank may as well sit on a hung or fail-slow GPU, which prints nothing
either: it is named as ``context`` (the evidence shows which rank and node the others
waited for) and the verdict stays "symptoms only". So are several silent ranks that all ran
on one node (every rank of a node that hung): that node is named. The event's time is when
the collective began, the first timeout less its ``Timeout(ms)``.

A stack the silent rank's node may have printed after the collective began (py-spy's dump,
faulthandler's, a traceback: ``cuda_framework.yaml``) that shows a process waiting in its
DataLoader for the next batch says what the one silent rank was doing instead: that wait
becomes the root candidate (``workload``, never ``definitive``), whichever the rank. Such
a stack only counts for one silent rank: its node's other ranks were in the collective,
so the process stuck elsewhere was the silent one (a stack naming another rank does not
count); a whole node gone silent is more likely the node's own trouble. So does a stack of
that one silent rank (Python's faulthandler dump, a traceback: :data:`FRAME_EVENT`) printed
after the collective began none of whose frames is in PyTorch's own code (save its data
loading: :data:`WAITING_FRAME`): the rank was not in a collective, nor waiting on its GPU,
but in the job's own code (a deadlock in its metrics writer, a loop waiting for a file), so
its straggler event becomes a ``workload`` root candidate, as a silent rank 0's is.

A shared filesystem that stalled under the silent rank (a checkpoint or dataset read that
hung in the kernel) is reported by its clients: when the silent node and at least one other
node of the attempt reported storage trouble (:data:`STORAGE_REPORTS`: a Lustre RPC timed
out on a slow reply, an NFS server not responding) while the others waited, every client
saw the filesystem stall, and the rank only waited on it. Those reports become the root
candidates (a shared service several nodes report names no node) and the straggler event
context.

Several whole nodes silent (every rank of each, while the others timed out) name no
straggler; but what each of them reported while the others waited (:data:`WAIT_REPORTS`)
becomes its root candidates as a single silent node's do: two nodes whose CPUs locked up
together are why the collective never completed.

A node the others waited for that reported its CPUs stuck (soft lockups under a minute,
``context`` on their own: a busy node prints them too), a task blocked for minutes, or
its CPUs or GPUs slowed by heat or a power brake (:data:`WAIT_REPORTS`) between the start
of the collective and the first timeout (the latest moment it can have been printed; a
repeated report counts when any of its repeats falls in that wait) hung or crawled there:
those reports become its root candidates (never ``definitive``: nothing links the
timeouts to them); its slowdowns do not where the silent rank's stack showed it waiting in
its DataLoader (a throttled CPU or GPU crawls; it does not leave a DataLoader empty for the
watchdog's whole timeout). A silent rank 0 whose node's kernel stalled so (its CPUs stuck, a
task blocked: :data:`HANG_REPORTS`) was not at its own work: its straggler event becomes
context.

A silent node's reports of that kind count beside a root candidate another node already
has, too (a GPU that fell off the bus on another silent node): a whole node that reported
no timeout and no root candidate of its own (Slurm's word that it failed, saying only that
it went, does not count), but its CPUs stuck during the wait, is as
good a reason for the hang, and they become its root candidates for the verdict to weigh
against the other (one stuck since before the other fault is its rival:
:func:`engine.decide.onset`). So do the kernel's stalls (:data:`HANG_REPORTS`) of a node
holding one of a few silent ranks (:data:`FEW_SILENT_NODES`), not all its ranks silent: a
rank each on two nodes never joined, one node's GPU fell off the bus, the other's CPU was
stuck under a process the while; a node all of whose ranks timed out waited with the
others, and its stalls stay context.

When no rank reported a collective timing out, but the ranks of one node alone reported
their NCCL watchdog stuck (PyTorch's heartbeat monitor: a NCCL or CUDA call hung under
it, and the process was aborted before any collective timed out), that node's kernel
reports of a task blocked or a CPU stuck while it was (:data:`HANG_REPORTS`) are one fault
with it: they become its root candidates.

When every rank timed out, none is missing; but a collective every rank entered still
waits for the slowest, and a node whose kernel reported tasks blocked for minutes
(``host.hung_task``, a cascade on its own: a hung filesystem or driver call makes them,
and names itself) or its CPUs stuck (soft lockups, RCU stalls) during that wait, the only
node of the attempt to do so, was that slowest one: thrashing, stalled in the kernel. With
nothing else to explain the failure, its reports become its root candidates (never
``definitive``: nothing links the timeouts to them).

A whole node the others waited for that reported nothing of the kind, and whose kernel
booted again between the start of the collective and :data:`REBOOT_SOON` after the
attempt's end (``host.node_boot``, looked up in past events too: the boot usually comes
after the attempt's window closed), went down: it lost power, hung or crashed, and its log
stopped with it. It becomes a ``host.node_failure`` root candidate at the moment the
collective began, the straggler event its context.
Contract: :mod:`engine.rules.python_rules`.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.config import NODE_LOG_SOURCES
from engine.decide import NODE_FAILURE
from engine.rules.python_rules import (
    BOOT_EVENT, COLLECTIVE_TIMEOUT_EVENT, SLOWDOWN_CAUSES, at_rows, new_events, node_down_events, rebooted,
    rooted_attempts, with_role, with_values,
)
from ingest.schema import processes_per_node

RULE_ID = "straggler_rank"
CAUSES = (
    ("workload.straggler_rank", "workload", "root_candidate", "straggler_rank"),
    ("unknown.straggler_rank", "unknown", "context", "straggler_rank"),
    ("host.node_failure", "host", "root_candidate", "host.node_lost"),
)
"""Rank 0 stuck (its own code: tokenising, loading data) is the root; another rank, or a
node's ranks, are only named, as context, for someone to look at; a whole silent node that
booted again soon after went down."""
HISTORY_EVENTS = (BOOT_EVENT,)
REBOOT_SOON = timedelta(minutes=30)
"""How soon after the attempt ended a whole silent node's boot still says it went down
while the others waited (a crashed node's watchdog or BMC restarts it within minutes; a
later boot is more likely an operator's, after whatever else was wrong)."""
STALL_CAUSE = "host.cpu_stall"
"""The cause of a node's reports of a CPU stuck in the kernel (``host.yaml``)."""
HUNG_EVENT = "host.hung_task"
"""The event of the kernel's report of a task blocked for minutes (``host.yaml``)."""
DATA_WAIT_EVENT = "workload.data_loader_wait"
"""The event of a stack inside the DataLoader's fetch of the next batch (``cuda_framework.yaml``)."""
FRAME_EVENT = "workload.traceback_frame"
"""The event of a Python stack frame (``File "…", line N[,] in f``: a traceback's, or
faulthandler's dump of every thread; ``cuda_framework.yaml``), its path in ``file``."""
WAITING_FRAME = (pl.col("_file").str.contains(r"(?:^|/)torch/")
                 & ~pl.col("_file").str.contains(r"(?:^|/)torch/utils/data/")).fill_null(False)
"""A frame (its path, ``_file``) in PyTorch's own code other than its data loading
(``torch/utils/data``, which :data:`DATA_WAIT_EVENT` reads): a rank there was in a
collective, a CUDA call or waiting on its GPU, not in the job's own code."""
WAIT_REPORTS = (
    (pl.col("cause").is_in([STALL_CAUSE, *SLOWDOWN_CAUSES])
     & (pl.col("role") == "context"))
    | (pl.col("event") == HUNG_EVENT)
)
"""What a silent node may have reported while the others waited that says why it never
came: its CPUs stuck, a task blocked in the kernel, its CPUs or GPUs throttled (the kernel's
thermal throttle, DCGM's or the driver's slowdown reports, DCGM's temperature gauge above
its slowdown point: ``host.yaml``, ``gpu_health.yaml``, ``metrics.yaml``)."""
HANG_REPORTS = ((pl.col("cause") == STALL_CAUSE) & (pl.col("role") == "context")) | (pl.col("event") == HUNG_EVENT)
"""Of :data:`WAIT_REPORTS`, those that say a node's kernel stalled (its CPUs stuck, a task
blocked), not that it slowed: what makes the slowest node of a collective every rank
entered, or outweighs a silent rank 0's own work."""


STORAGE_REPORTS = (
    (pl.col("domain") == "storage") & pl.col("role").is_in(["cascade", "context"]) & pl.col("node").is_not_null()
    & pl.col("source").is_in(NODE_LOG_SOURCES)
)
"""A node's kernel reporting its filesystem client's trouble (``storage.yaml``), a cascade
or context on its own: a slow reply now and then is the load of a busy filesystem."""


def _world(attempts: pl.DataFrame) -> pl.DataFrame:
    """Per attempt: ranks per node and world size, where the attempts table knows them."""
    per_node = processes_per_node()
    return attempts.select(
        "attempt_id", "nodes", per_node.alias("_per_node"), (per_node * pl.col("nodes").list.len()).alias("_world"),
    ).filter(pl.col("_world") > 1)


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Add a straggler event to each attempt without a root whose ranks all reported a
    watchdog timeout but one, or but ranks of one node (a ``workload`` root for rank 0
    alone, ``context`` otherwise), and make what the silent node reported while the others
    waited (:data:`WAIT_REPORTS`) its root candidates; where every rank timed out, make the hung-task
    reports of the one node that printed any during the wait its root candidates. In an
    attempt with a root candidate, a whole silent node's wait reports become root
    candidates beside it (:func:`_stalls_beside_roots`)."""
    if events.is_empty() or context.attempts.is_empty():
        return events
    timeouts = events.filter((pl.col("event") == COLLECTIVE_TIMEOUT_EVENT) & pl.col("rank").is_not_null())
    rooted = rooted_attempts(events)
    events = _stalls_beside_roots(events, timeouts.join(rooted, on="attempt_id", how="semi"), context.attempts)
    events = _stuck_node_as_root(events, pl.concat([rooted, timeouts.select("attempt_id")]).unique())
    timeouts = timeouts.join(rooted, on="attempt_id", how="anti")
    if timeouts.is_empty():
        return events
    world, firsts, noticed = _wait(timeouts, context.attempts)
    # The ranks of a node are consecutive: sorted, the first and last missing ranks share
    # a node only when all of them do.
    at = pl.col("_missing").list.first() // pl.col("_per_node")
    missing = (
        world.filter((pl.col("_missing").list.len() > 0) & (at == pl.col("_missing").list.last() // pl.col("_per_node")))
        .select(
            "attempt_id", "_missing",
            pl.col("_missing").list.first().alias("_rank"),
            (pl.col("_missing").list.len() == 1).alias("_alone"),
            pl.col("nodes").list.get(at, null_on_oob=True).alias("_node"),
            pl.col("_world"), pl.col("_per_node"),
        )
    )
    began = _began()
    everyone = world.filter(pl.col("_missing").list.len() == 0)
    events = _hung_node_as_root(
        events, firsts.join(everyone, on="attempt_id", how="semi").select("attempt_id", began.alias("_began"))
        .join(noticed, on="attempt_id"),
    )
    # Several whole nodes silent: no straggler, but each one's stalls while the others waited.
    several = _silent_nodes(world.join(missing, on="attempt_id", how="anti"))
    events = _stalls_as_roots(events, several.join(firsts.select("attempt_id", began.alias("_began")), on="attempt_id")
                              .join(noticed, on="attempt_id"))
    if missing.is_empty():
        return events
    first = firsts.join(missing, on="attempt_id")
    seqnum = pl.col("_seqnum").fill_null("?")
    silent = pl.when(pl.col("_alone")).then(pl.concat_str([pl.lit("rank "), pl.col("_rank").cast(pl.String)])).otherwise(
        pl.concat_str([pl.lit("ranks "), pl.col("_missing").cast(pl.List(pl.String)).list.join(","), pl.lit(" of "),
                       pl.col("_node").fill_null("one node")]))
    message = pl.concat_str([
        silent, pl.lit(" never joined collective SeqNum="), seqnum,
        pl.lit(" in which the other "), (pl.col("_world") - pl.col("_missing").list.len()).cast(pl.String),
        pl.lit(" ranks timed out (they reported no timeout of their own): busy elsewhere or hung"),
    ])
    rank_zero = pl.col("_alone") & (pl.col("_rank") == 0)
    added = new_events(
        first.with_columns(
            pl.struct(pl.col("_missing").alias("ranks"), seqnum.alias("seqnum")).struct.json_encode().alias("params"),
            message.alias("message"),
            pl.col("_node").alias("node"),
            pl.when(pl.col("_alone")).then(pl.col("_rank")).alias("rank"),
            began.alias("ts"),
        ).drop("gpu", "port", "caused_by"),
        events, rule_id=RULE_ID, event="straggler_rank",
        domain=pl.when(rank_zero).then(pl.lit("workload")).otherwise(pl.lit("unknown")),
        cause=pl.when(rank_zero).then(pl.lit("workload.straggler_rank")).otherwise(pl.lit("unknown.straggler_rank")),
        role=pl.when(rank_zero).then(pl.lit("root_candidate")).otherwise(pl.lit("context")),
        action=pl.when(rank_zero).then(pl.lit("fix_workload")).otherwise(pl.lit("investigate")),
    )
    waited = first.select("attempt_id", "_node", began.alias("_began")).join(noticed, on="attempt_id")
    alone = first.filter(pl.col("_alone")).select("attempt_id", "_node", "_rank", began.alias("_began"))
    events = _data_waits_as_roots(pl.concat([events, added]), alone)
    # A rank whose stack shows it waiting for its next batch was not slowed by heat: a
    # throttled CPU or GPU crawls, it does not leave a DataLoader empty for the watchdog's
    # whole timeout.
    fed = events.filter((pl.col("event") == DATA_WAIT_EVENT) & (pl.col("role") == "root_candidate"))["attempt_id"]
    events = _own_work_as_root(events, alone.filter(pl.col("_rank") != 0).join(fed.to_frame(), on="attempt_id", how="anti"))
    events = _stalls_as_roots(_storage_stalls_as_roots(events, waited), waited, fed)
    whole = first.filter(pl.col("_missing").list.len() == pl.col("_per_node"))
    return _rebooted_node_as_root(events, whole.select("attempt_id", "_node", "end_ts", began.alias("_began")), context)


def _began() -> pl.Expr:
    """When the collective that timed out began, on a first timeout row of :func:`_wait`:
    its stamp less its ``Timeout(ms)``, not before the attempt started (an unstamped
    timeout line only inherited an earlier stamp)."""
    return pl.max_horizontal(pl.col("ts") - pl.duration(milliseconds=pl.col("_timeout_ms").fill_null(0)),
                             pl.col("start_ts"))


def _reported_world(timeouts: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """Per attempt with a known world size: ``nodes``, ``_per_node``, ``_world`` and the
    ``_missing`` ranks that reported no timeout among ``timeouts``."""
    # A row may stand for the same line of several ranks of its node (``ranks``).
    ranks = pl.coalesce("ranks", pl.concat_list("rank")).alias("_rank")
    reported = (
        timeouts.select("attempt_id", ranks).explode("_rank")
        .group_by("attempt_id").agg(pl.col("_rank").cast(pl.Int64).unique().alias("_reported"))
    )
    return reported.join(_world(attempts), on="attempt_id").with_columns(
        pl.int_ranges(0, pl.col("_world")).list.set_difference("_reported").list.sort().alias("_missing"))


def _wait(timeouts: pl.DataFrame, attempts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What the watchdog timeouts of each attempt say of the wait: ``world`` (per attempt
    with a known world size: ``nodes``, ``_per_node``, ``_world`` and the ``_missing`` ranks
    that reported none), ``firsts`` (each attempt's first timeout row, with the
    ``_timeout_ms`` and ``_seqnum`` the lines say) and ``noticed`` (``_noticed``: the latest
    moment the first timeout can have been printed, its ``ts_hi``)."""
    world = _reported_world(timeouts, attempts)
    # The first timeout line of each attempt carries every column; a new event is built
    # from it. The timeout and the collective's number come from the lines that say them:
    # not every timeout line does (the watchdog's exception line, printed with the same
    # stamp, names neither).
    said = timeouts.sort("attempt_id", "ts", "event_id").group_by("attempt_id").agg(
        pl.col("params").str.json_path_match("$.timeout_ms").cast(pl.Int64, strict=False).max().alias("_timeout_ms"),
        pl.col("params").str.json_path_match("$.seqnum").drop_nulls().first().alias("_seqnum"),
    )
    firsts = (
        timeouts.sort("attempt_id", "ts", "event_id")
        .group_by("attempt_id", maintain_order=True)
        .first()
        .join(said, on="attempt_id", how="left")
    )
    noticed = timeouts.group_by("attempt_id").agg(pl.col("ts_hi").min().alias("_noticed"))
    return world, firsts, noticed


def _stalls_beside_roots(events: pl.DataFrame, timeouts: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """``events`` with what each whole node that reported no timeout, in an attempt with a
    root candidate already, reported while the others waited (:data:`WAIT_REPORTS`) made
    root candidates, where that node has no root candidate of its own: a silent node's CPUs
    stuck during the wait are as good a reason for the hang as another node's fault, and
    the verdict weighs them (``timeouts``: those attempts' watchdog timeouts)."""
    if timeouts.is_empty():
        return events
    # A node's own root that only says it stopped answering (slurmctld's word, later) says
    # less than its kernel's stalls while the others waited: those still count.
    own_roots = events.filter((pl.col("role") == "root_candidate") & pl.col("node").is_not_null()
                              & (pl.col("cause") != NODE_FAILURE)) \
        .select("attempt_id", pl.col("node").alias("_node")).unique()
    world = _reported_world(timeouts, attempts)
    whole = _silent_nodes(world)
    silent = whole.join(own_roots, on=["attempt_id", "_node"], how="anti")
    partly = _nodes_of_few_silent_ranks(world).join(whole, on=["attempt_id", "_node"], how="anti") \
        .join(own_roots, on=["attempt_id", "_node"], how="anti")
    if silent.is_empty() and partly.is_empty():
        return events
    # The wide timeout rows are sorted for the few attempts with such a node only.
    _, firsts, noticed = _wait(timeouts.join(pl.concat([silent, partly]), on="attempt_id", how="semi"), attempts)
    wait = firsts.select("attempt_id", _began().alias("_began")).join(noticed, on="attempt_id")
    events = _stalls_as_roots(events, silent.join(wait, on="attempt_id"))
    return _stalls_as_roots(events, partly.join(wait, on="attempt_id"), reports=HANG_REPORTS)


FEW_SILENT_NODES = 2
"""At most how many nodes the ranks that reported no timeout may lie on for a node holding
one of them, not all its ranks silent, to be weighed by its kernel's stalls: a rank each on
two nodes went missing (one node's GPU off the bus, the other's CPU stuck under its rank's
process); with more, ranks missing from many nodes say the job hung all over, and every
busy node's soft lockups would stand as rivals."""


def _nodes_of_few_silent_ranks(world: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` and ``_node`` of each node of ``world``'s attempts holding a rank that
    reported no timeout, where those ranks lie on at most :data:`FEW_SILENT_NODES` nodes."""
    held = (
        world.select("attempt_id", "nodes", "_per_node", pl.col("_missing").alias("_rank")).explode("_rank")
        .drop_nulls("_rank")
        .select("attempt_id", pl.col("nodes").list.get(pl.col("_rank") // pl.col("_per_node"), null_on_oob=True)
                .alias("_node"))
        .drop_nulls("_node").unique()
    )
    return held.filter(pl.len().over("attempt_id") <= FEW_SILENT_NODES)


def _storage_stalls_as_roots(events: pl.DataFrame, waited: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the storage reports (:data:`STORAGE_REPORTS`) made during the wait
    made root candidates, and the straggler event context, in each attempt of ``waited``
    (per attempt: the silent node, when the collective began and when the first timeout
    was printed) where the silent node and another node made some."""
    reports = _in_wait(
        events.with_row_index("_row").filter(STORAGE_REPORTS).select("_row", "attempt_id", "node", "ts", "last_ts"),
        waited, ["attempt_id"],
    )
    stalled = (
        reports.group_by("attempt_id")
        .agg((pl.col("node") == pl.col("_node")).any().alias("_silent_too"), pl.col("node").n_unique().alias("_nodes"))
        .filter(pl.col("_silent_too") & (pl.col("_nodes") > 1))
    )
    if stalled.is_empty():
        return events
    promoted = at_rows(events, reports.join(stalled, on="attempt_id", how="semi")["_row"])
    straggler = (pl.col("rule_id") == RULE_ID) & pl.col("attempt_id").is_in(stalled["attempt_id"].implode())
    return with_role(with_role(events, promoted, "root_candidate"), straggler, "context")


def _silent_nodes(world: pl.DataFrame) -> pl.DataFrame:
    """``attempt_id`` and ``_node`` of each node of ``world``'s attempts (its ``nodes``,
    ``_per_node`` and ``_missing`` ranks) none of whose ranks reported a timeout."""
    silent = (
        world.select("attempt_id", "nodes", "_per_node", pl.col("_missing").alias("_rank")).explode("_rank")
        .drop_nulls("_rank")
        .group_by("attempt_id", (pl.col("_rank") // pl.col("_per_node")).alias("_index"))
        .agg(pl.len().alias("_silent"), pl.col("_per_node").first(), pl.col("nodes").first())
        .filter(pl.col("_silent") == pl.col("_per_node"))
    )
    return silent.select(
        "attempt_id", pl.col("nodes").list.get(pl.col("_index"), null_on_oob=True).alias("_node")).drop_nulls("_node")


def _in_wait(reports: pl.DataFrame, waited: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """The ``reports`` (with ``_row``) of each attempt of ``waited`` (joined ``on``) that
    fell between the collective's start (``_began``) and its first timeout (``_noticed``);
    a flood (one event, its repeats up to ``last_ts``) counts when any of it did."""
    return reports.join(waited, on=on).filter(
        (pl.col("ts") <= pl.col("_noticed")) & (pl.coalesce("last_ts", "ts") >= pl.col("_began")))


def _hung_node_as_root(events: pl.DataFrame, waited: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the hung-task and CPU-stall reports (:data:`HANG_REPORTS`) of the one
    node of each attempt of ``waited`` (every rank timed out; when the collective began and
    when the first timeout was printed) whose kernel reported any during that wait made root
    candidates."""
    hung = _in_wait(
        events.with_row_index("_row").filter(HANG_REPORTS & pl.col("node").is_not_null())
        .select("_row", "attempt_id", "node", "ts", "last_ts"),
        waited, ["attempt_id"],
    ).filter(pl.col("node").n_unique().over("attempt_id") == 1)
    if hung.is_empty():
        return events
    return with_role(events, at_rows(events, hung["_row"]), "root_candidate")


STUCK_EVENT = "network.heartbeat_timeout"
"""PyTorch's report that a rank's NCCL watchdog thread itself stopped (its heartbeat monitor
timed out, or "watchdog got stuck for N seconds": a NCCL or CUDA call hung under it;
``communication.yaml``)."""
STUCK_DEFAULT = timedelta(minutes=10)
"""How long before its report a rank's watchdog is taken to have stopped when the line
says not (the heartbeat monitor's; the stuck line says its seconds)."""


def _stuck_node_as_root(events: pl.DataFrame, excluded: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the hung-task and CPU-stall reports (:data:`HANG_REPORTS`) of the one
    node whose ranks alone reported their watchdog stuck (:data:`STUCK_EVENT`), printed
    while it was, made root candidates: in an attempt no rank of which reported a
    collective timing out and nothing else explains (``excluded``: those with a root
    candidate or a timeout), a NCCL or CUDA call that hung in those ranks' process and their
    kernel's report of a task blocked, or a CPU stuck, there are one fault."""
    stuck = (
        events.filter((pl.col("event") == STUCK_EVENT) & pl.col("node").is_not_null())
        .join(excluded, on="attempt_id", how="anti")
        .filter(pl.col("node").n_unique().over("attempt_id") == 1)
    )
    if stuck.is_empty():
        return events
    lasted = pl.duration(seconds=pl.col("params").str.json_path_match("$.stuck_s").cast(pl.Int64, strict=False))
    waited = stuck.group_by("attempt_id").agg(
        pl.col("node").first().alias("_node"),
        (pl.col("ts") - lasted.fill_null(STUCK_DEFAULT)).min().alias("_began"),
        pl.col("ts_hi").max().alias("_noticed"),
    )
    return _stalls_as_roots(events, waited, reports=HANG_REPORTS)


def _data_waits_as_roots(events: pl.DataFrame, alone: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the DataLoader waits (:data:`DATA_WAIT_EVENT`) printed on the node of
    each attempt's one silent rank at or after the collective began (by the latest moment
    they can have been printed, ``ts_hi``: py-spy stamps none of its lines, and a dump
    inherits the last progress line's stamp from before the hang) made root candidates
    (and, for a silent rank 0, its straggler event context: the wait says more). ``alone``:
    per attempt, the silent rank (``_rank``), its node and when the collective began. A
    stack naming another rank is not the silent one's."""
    waits = (
        events.with_row_index("_row")
        .filter((pl.col("event") == DATA_WAIT_EVENT) & pl.col("node").is_not_null())
        .select("_row", "attempt_id", "node", "rank", "ts_hi")
        .join(alone.rename({"_node": "node"}), on=["attempt_id", "node"])
        .filter((pl.col("ts_hi") >= pl.col("_began")) & (pl.col("rank").is_null() | (pl.col("rank") == pl.col("_rank"))))
    )
    if waits.is_empty():
        return events
    explained = (pl.col("rule_id") == RULE_ID) & pl.col("attempt_id").is_in(waits["attempt_id"].implode())
    return with_role(with_role(events, at_rows(events, waits["_row"]), "root_candidate"),
                     explained & (pl.col("role") == "root_candidate"), "context")


def _own_work_as_root(events: pl.DataFrame, alone: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the straggler event of each attempt of ``alone`` (per attempt: its one
    silent rank, not rank 0, its node and when the collective began; none a DataLoader wait
    already explains) made a ``workload`` root candidate where that rank printed a stack at
    or after the collective began (by ``ts_hi``) none of whose frames is in PyTorch's own
    code (:data:`WAITING_FRAME`)."""
    frames = (
        events.filter((pl.col("event") == FRAME_EVENT) & pl.col("rank").is_not_null())
        .select("attempt_id", "node", "rank", "ts_hi", pl.col("params").str.json_path_match("$.file").alias("_file"))
        .join(alone.rename({"_node": "node", "_rank": "rank"}), on=["attempt_id", "node", "rank"])
        .filter(pl.col("ts_hi") >= pl.col("_began"))
    )
    if frames.is_empty():
        return events
    busy = frames.group_by("attempt_id").agg(WAITING_FRAME.any().alias("_waiting")).filter(
        ~pl.col("_waiting"))["attempt_id"]
    straggler = (pl.col("rule_id") == RULE_ID) & pl.col("attempt_id").is_in(busy.implode())
    return with_values(events, straggler, role="root_candidate", domain="workload", cause="workload.straggler_rank",
                       action="fix_workload")


def _stalls_as_roots(events: pl.DataFrame, waited: pl.DataFrame, data_waits: pl.Series | None = None,
                     reports: pl.Expr = WAIT_REPORTS) -> pl.DataFrame:
    """``events`` with the ``reports`` (:data:`WAIT_REPORTS`) each attempt's silent node made
    between the collective's start and its first timeout made root candidates.
    ``waited``: per attempt, the silent node, when the collective began and when the first
    timeout was printed. ``data_waits``: attempts whose silent rank was waiting in its
    DataLoader, where reports of a slowdown (:data:`SLOWDOWN_CAUSES`) stay as they were."""
    if data_waits is not None and not data_waits.is_empty():
        reports = reports & ~(pl.col("cause").is_in(SLOWDOWN_CAUSES) & pl.col("attempt_id").is_in(data_waits.implode()))
    stalls = _in_wait(
        events.with_row_index("_row")
        .filter(reports)
        .select("_row", "attempt_id", "node", "ts", "last_ts"),
        waited.rename({"_node": "node"}), ["attempt_id", "node"],
    )
    if stalls.is_empty():
        return events
    # A silent rank 0's own work (the straggler root) is no reason beside its node's kernel
    # stalling while the others waited.
    stalled = events[stalls["_row"]].filter(HANG_REPORTS)["attempt_id"]
    outweighed = ((pl.col("rule_id") == RULE_ID) & (pl.col("role") == "root_candidate")
                  & pl.col("attempt_id").is_in(stalled.implode()))
    return with_role(with_role(events, at_rows(events, stalls["_row"]), "root_candidate"), outweighed, "context")


def _rebooted_node_as_root(events: pl.DataFrame, whole: pl.DataFrame, context) -> pl.DataFrame:
    """``events`` with a ``host.node_failure`` root candidate added for the whole silent
    node of each attempt of ``whole`` (per attempt: the node, the attempt's end and when
    the collective began) that has no root candidate yet and booted between the
    collective's start and :data:`REBOOT_SOON` after the end; the attempt's straggler event
    becomes context."""
    if whole.is_empty():
        return events
    whole = whole.join(rooted_attempts(events), on="attempt_id", how="anti")
    straggler = events.filter(pl.col("rule_id") == RULE_ID).join(whole, on="attempt_id", how="semi")
    found = rebooted(straggler.join(whole.select("attempt_id", "_began", _end="end_ts"), on="attempt_id"), events, context,
                     since=pl.col("_began"), until=pl.col("_end") + REBOOT_SOON, key="attempt_id")
    if found.is_empty():
        return events
    why = pl.concat_str([pl.lit("node "), pl.col("node"), pl.lit(" went down: "),
                         pl.col("message").str.replace(r": busy elsewhere or hung$", "")])
    added = node_down_events(found, events, rule_id=RULE_ID, why=why)
    explained = (pl.col("rule_id") == RULE_ID) & pl.col("attempt_id").is_in(found["attempt_id"].implode())
    return pl.concat([with_role(events, explained, "context"), added])
