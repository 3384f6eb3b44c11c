"""Correlate: attach events to the attempts they can explain, and link cascades to roots.

Node-scoped events (kernel, fabric, metrics: no ``attempt_id``) attach to every attempt that
ran on that node within ``[start - lookback, end + grace]`` — an interval join done as an
equi-join on ``(cluster, node)`` followed by a range filter. Application events already carry
their attempt. Then the pack's ``suppress`` and ``precedence`` rules re-label events whose
meaning depends on what happened around them, as joins within a scope and a time window.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import polars as pl

from engine.config import EngineConfig
from engine.decide import CLOCK_OFFSET_RULE, INFRASTRUCTURE
from engine.extract import DEDUPE_KEYS, dedupe_events, dedupe_window_s
from engine.rules.loader import RulePack
from engine.rules.model import PrecedenceRule, Selector, SuppressRule, parse_duration
from engine.rules.python_rules import attempt_job_id, new_events, param

ATTEMPT_COLUMNS = ["attempt_id", "cluster", "job_id", "user", "state", "start_ts", "end_ts"]
"""Attempt columns carried on every correlated event (what python rules may rely on)."""

SCOPE_KEYS = {
    "attempt": ["attempt_id"],
    "node": ["attempt_id", "node"],
    "gpu": ["attempt_id", "node", "gpu"],
    "port": ["attempt_id", "node", "port"],
}


def attach_events(
    attempts: pl.DataFrame, events: pl.DataFrame, pack: RulePack, config: EngineConfig,
    launches: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Events joined to attempts: one row per (attempt, event) with the attempt columns.

    ``attempts`` has the attempts table's columns plus ``cluster``; ``events`` the events
    table's plus ``cluster``. The result keeps the event columns, sets ``attempt_id`` and adds
    ``job_id``, ``user``, ``state``, ``start_ts``, ``end_ts``, ``ts_hi``
    (:func:`add_time_bounds`), ``ranks`` (:func:`collapse_rank_copies`, whose windows are
    the ``pack``'s) and ``caused_by`` (null here).
    A node whose clock runs off its peers' has its events read on theirs
    (:func:`clock_offsets`, or where no launch line places it, :func:`output_clock_offsets`),
    and the job's lines its ranks stamped on that clock (:func:`on_peer_clocks`), with a
    note in the evidence. ``launches``: slurmd's launch
    lines, already split off ``events`` by :func:`split_launch_lines` (a run splits each
    day once as it reads it); without them, ``events`` is split here.
    """
    if launches is None:
        events, launches = split_launch_lines(events)
    lookback = timedelta(seconds=config.seconds("lookback"))
    grace = timedelta(seconds=config.seconds("grace"))
    skew = timedelta(seconds=config.seconds("clock_skew"))
    # Joined on the attempt id alone, then checked for the cluster: a join on two string
    # keys costs about three times as much, and the result is the same.
    app_events = (
        events.filter(pl.col("attempt_id").is_not_null())
        .join(attempts.select(ATTEMPT_COLUMNS).rename({"cluster": "_cluster"}), on="attempt_id", how="inner")
        .filter(pl.col("cluster") == pl.col("_cluster"))
    )
    offsets = clock_offsets(attempts, launches, skew)
    read = output_clock_offsets(app_events, offsets, skew)
    if offsets.height or read.height:
        app_events = on_peer_clocks(app_events, offsets, skew, read)
        offsets = pl.concat([offsets, read])
    windows = node_day_windows(attempts, lookback, grace, ATTEMPT_COLUMNS, offsets)
    node_events = events.filter(pl.col("attempt_id").is_null()).drop("attempt_id")
    # A window of a node whose clock is off lies on that clock; its events, once inside,
    # move back onto the attempt's.
    shift = pl.col("_offset").fill_null(timedelta(0))
    on_nodes = in_windows(node_events, windows).with_columns(
        (pl.col("ts") - shift).alias("ts"), (pl.col("last_ts") - shift).alias("last_ts")
    )
    columns = events.columns + [c for c in ATTEMPT_COLUMNS if c not in events.columns]
    # One chunk: every later sort, join and filter gathers rows of this wide frame, and a
    # gather over several chunks costs several times more.
    parts = [on_nodes.select(columns), app_events.select(columns)]
    if offsets.height:
        parts.append(clock_notes(offsets, attempts, events))
    attached = pl.concat(parts, rechunk=True)
    return (
        collapse_rank_copies(add_time_bounds(attached, skew), pack)
        .with_columns(pl.lit(None, dtype=pl.String).alias("caused_by"))
        .sort(["attempt_id", "ts", "node", "origin", "rule_id"], nulls_last=True)
    )


def on_peer_clocks(
    app_events: pl.DataFrame, offsets: pl.DataFrame, skew: timedelta, read: pl.DataFrame,
) -> pl.DataFrame:
    """The job's lines stamped on a node whose clock runs off (:func:`clock_offsets`),
    moved by its offset when they show they read that clock: its ranks' reports of the
    collective that timed out (NCCL's watchdog, ``timeout_ms``) are stamped that far, within
    ``skew``, from the other nodes' ranks' reports of it. A rank's logging reads its node's
    clock, unless its lines were stamped elsewhere (a collector that restamps them), so
    they move only when their own stamps say so; unstamped lines keep the stamp they
    inherited. The offsets ``read`` off the job's output (:func:`output_clock_offsets`)
    come from those lines' own stamps: their lines move by them."""
    timeouts = (
        app_events.filter(_reports_timeout() & (pl.col("ts_source") == "line") & pl.col("node").is_not_null())
        .group_by("attempt_id", "node").agg(pl.col("ts").median().alias("_seen"))
    )
    seen = (
        timeouts.join(timeouts, on="attempt_id", suffix="_peer")
        .filter(pl.col("node") != pl.col("node_peer"))
        .group_by("attempt_id", "node").agg((pl.col("_seen") - pl.col("_seen_peer")).median().alias("_apart"))
    )
    moved = pl.concat([
        offsets.join(seen, on=["attempt_id", "node"]).filter(
            (pl.col("_apart") - pl.col("_offset")).abs() <= skew
        ).select("attempt_id", "node", "_offset"),
        read.select("attempt_id", "node", "_offset"),
    ])
    if moved.is_empty():
        return app_events
    own = pl.col("_offset").is_not_null() & (pl.col("ts_source") == "line")
    return (
        app_events.join(moved, on=["attempt_id", "node"], how="left", maintain_order="left")
        .with_columns(
            pl.when(own).then(pl.col("ts") - pl.col("_offset")).otherwise(pl.col("ts")).alias("ts"),
            pl.when(own).then(pl.col("last_ts") - pl.col("_offset")).otherwise(pl.col("last_ts")).alias("last_ts"),
        )
        .drop("_offset")
    )


RANK_COPY_KEYS = [k for k in DEDUPE_KEYS if k != "rank"] + ["params"]
"""Cascades of one attempt equal on these columns are the same line printed by several
ranks of a node (:func:`collapse_rank_copies`)."""


def collapse_rank_copies(events: pl.DataFrame, pack: RulePack) -> pl.DataFrame:
    """``events`` with ``ranks`` added, and each cascade several ranks of a node printed
    alike one row: the NCCL aborts and teardown traces a fault makes all of a job's healthy
    processes print (eight ranks per node, 4,096 lines for a 512-node job) say nothing
    that one of them per node does not, and they are most of a failed attempt's events,
    which every later join and sort pays for.

    Copies are cascades with a ``rank`` (lines of the job's processes) equal on
    :data:`RANK_COPY_KEYS` (``params`` included: a line naming its own peer or duration
    stays apart) and within the rule's ``dedupe_window`` of each other: the flood dedupe
    across ranks (:func:`engine.extract.dedupe_events`). The row kept is the earliest copy's,
    with ``count`` the lines of all of them, ``last_ts`` the latest, ``ts_hi`` the earliest
    (the latest moment the first of them can have been printed) and ``ranks`` the ranks
    that printed them, sorted; ``ranks`` is null on rows that stand for one rank or none.
    """
    # Every attached event has its attempt by now: the rank and role tell the copies.
    copies = pl.col("rank").is_not_null() & (pl.col("role") == "cascade")
    narrow = (
        events.lazy().with_row_index("_row").filter(copies)
        .select("_row", *RANK_COPY_KEYS, "ts", "origin", "rank", "last_ts", "count", "ts_hi",
                pl.lit(None, dtype=pl.List(pl.Int32)).alias("ranks"))
        .collect()
    )
    folds = [pl.col("ts_hi").min(), pl.col("rank").unique().sort().alias("ranks")]
    taken = ["_row", "last_ts", "count", "ts_hi", "ranks"]
    groups = (
        narrow.group_by(RANK_COPY_KEYS)
        .agg(pl.col("_row").sort_by("ts", "origin").first(), pl.col("_row").alias("_rows"),
             (pl.col("last_ts").max() - pl.col("ts").min()).dt.total_microseconds().alias("_span_us"),
             pl.col("last_ts").max(), pl.col("count").sum(), *folds)
        .filter(pl.col("_rows").list.len() > 1)
    )
    # A group whose copies lie within the rule's window first to last (a node's teardown
    # takes milliseconds) has every gap between them within it too: it is one burst, and
    # the grouping folded it. Only the rare group spread wider needs the dedupe's bursts.
    within = groups.select(pl.col("_span_us") <= dedupe_window_s(pack) * 1_000_000).to_series()
    spread = groups.filter(~within)["_rows"].explode()
    folded = pl.concat([
        groups.filter(within).select(taken),
        dedupe_events(narrow.filter(pl.col("_row").is_in(spread.implode())), pack, RANK_COPY_KEYS, folds).select(taken),
    ]).with_columns(pl.when(pl.col("ranks").list.len() > 1).then("ranks").alias("ranks"))
    # Each burst keeps its first row, which takes the burst's values; its other rows go.
    dropped = groups["_rows"].explode()
    dropped = dropped.filter(~dropped.is_in(folded["_row"].implode()))
    # Each row's burst in ``folded``, null for rows that were no copy (Polars scatters no
    # lists; a gather at null indices gives nulls).
    burst = pl.Series(dtype=pl.UInt32).extend_constant(None, events.height).scatter(
        folded["_row"], pl.int_range(folded.height, dtype=pl.UInt32, eager=True))
    kept = pl.repeat(True, events.height, dtype=pl.Boolean, eager=True).scatter(dropped, False)
    return events.with_columns(
        *(pl.coalesce(folded[c].gather(burst), c).alias(c) for c in ("last_ts", "count", "ts_hi")),
        folded["ranks"].gather(burst),
    ).filter(kept)


EVENT_TS = pl.Datetime("us", "UTC")
"""The dtype of event stamps."""
STEP_LAUNCH_EVENT = "scheduler.step_launch"
"""slurmd's launch of a step's tasks on its node (``scheduler.slurmd_step_launch``)."""
MIN_PEERS = 3
"""Nodes that must report launching one step before their median says whose clock is off."""


def split_launch_lines(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``events`` without slurmd's launch lines (:data:`STEP_LAUNCH_EVENT` on a node), and
    those lines as :func:`clock_offsets` reads them: ``cluster``, ``node``, ``ts``,
    ``origin``, ``source``, ``_job`` and ``_step``.

    They only place node clocks and never attach to an attempt, yet a node logs one per
    step it runs (a quarter to a third of the events each chunk of the simulated 1M fleet
    reads). Split off, no pass over the events carries them, and a run parses each day's
    once, not once per chunk that reads the day."""
    launch = (pl.col("event") == STEP_LAUNCH_EVENT) & pl.col("attempt_id").is_null()
    lines = (
        events.lazy().filter(launch & pl.col("node").is_not_null())
        .select("cluster", "node", "ts", "origin", "source", param("job").alias("_job"), param("step").alias("_step"))
        .collect()
    )
    return events.filter(~launch), lines


def clock_offsets(attempts: pl.DataFrame, lines: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """How far each node's clock runs off its peers', per attempt: ``attempt_id``, ``node``,
    ``_offset`` (a duration: the node's stamps minus its peers'), ``_step``, ``_launch``,
    ``_median``, and the ``origin`` and ``source`` of the node's launch line. ``lines``:
    the launch lines of :func:`split_launch_lines`.

    slurmd starts a step's tasks on every node of the step within a second: the stamps of
    its launch lines (:data:`STEP_LAUNCH_EVENT`, naming the job and step) for one step,
    from at least :data:`MIN_PEERS` nodes, agree but for the node clocks. A line belongs to
    the attempt of its job that started nearest it (a requeued job has several), however
    far the node's clock is off. A node whose launch stamp lies further than ``skew`` from
    the median of them runs that far off. The step reported by most nodes decides (the
    first of those). The node's logs move by it (the kernel's and daemons' lines, which the
    same syslog clock stamped), and so do the lines of the job's output its ranks stamped
    when those show they read that clock (:func:`on_peer_clocks`).
    """
    empty = pl.DataFrame(schema={"attempt_id": pl.String, "node": pl.String, "_offset": pl.Duration("us"),
                                 "_step": pl.String, "_launch": EVENT_TS, "_median": EVENT_TS,
                                 "origin": pl.String, "source": pl.String})
    if not lines.height:  # no slurmd log collected
        return empty
    owners = attempts.select("cluster", "attempt_id", "start_ts", attempt_job_id().alias("_job"))
    launches = (
        lines.join(owners, on=["cluster", "_job"])
        .sort("origin", (pl.col("ts") - pl.col("start_ts")).abs())
        .unique(["origin"], keep="first", maintain_order=True)
        .group_by("attempt_id", "_step", "node")
        .agg(pl.col("ts").min().alias("_launch"), pl.col("origin").sort_by("ts").first(),
             pl.col("source").sort_by("ts").first())
    )
    steps = (
        launches.group_by("attempt_id", "_step")
        .agg(pl.len().alias("_peers"), pl.col("_launch").median().alias("_median"))
        .filter(pl.col("_peers") >= MIN_PEERS)
        .sort("attempt_id", "_peers", "_step", descending=[False, True, False])
        .unique("attempt_id", keep="first", maintain_order=True)
    )
    return (
        launches.join(steps, on=["attempt_id", "_step"])
        .with_columns((pl.col("_launch") - pl.col("_median")).alias("_offset"))
        .filter(pl.col("_offset").abs() > skew)
        .select(empty.columns)
        .cast(empty.schema)
        .sort("attempt_id", "node")
    )


OUTPUT_CLOCK_LINES = 2
"""A node's stamped lines in a job's output that must sit above an earlier-stamped line of
another node before its clock is read as running ahead (:func:`output_clock_offsets`):
one stray stamp is not a clock."""


def output_clock_offsets(app_events: pl.DataFrame, placed: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """How far ahead of its peers' a node's clock runs, read off the job's output, for the
    nodes of failed attempts that no launch line placed (``placed``: :func:`clock_offsets`),
    in the columns of :func:`clock_offsets` (``_step`` null; ``_launch`` and ``_median``
    the stamps of the widest gap, ``origin`` the node's line there).

    srun writes its tasks' lines to the output as it receives them, so a line was printed
    no later than any line below it. A node's stamped line above a line another node
    stamped earlier says one of the two clocks is off by at least the difference; buffered
    output only ever delays a line, so it can make a line look late, never early. A node
    whose lines sit above the next line of another node by more than ``skew``, on
    :data:`OUTPUT_CLOCK_LINES` lines or more, runs ahead of them, rather than they behind
    it, when it does so above the lines of two or more other nodes, or when its own stamps
    run past the attempt's end (the scheduler's clock; a two-node job): by the median of
    those differences, a lower bound (the lines below were printed a little later).
    Completed attempts are left alone: their verdict does not turn on the order.
    """
    empty = placed.clear()
    stamped = (
        app_events.lazy()
        .filter((pl.col("ts_source") == "line") & pl.col("node").is_not_null() & (pl.col("state") != "completed"))
        .select("attempt_id", "node", "ts", "origin", "end_ts",
                pl.col("origin").str.replace(r":\d+$", "").alias("_file"),
                pl.col("origin").str.extract(r":(\d+)$").cast(pl.Int64).alias("_line"))
        .drop_nulls("_line")
        .filter(pl.col("node").n_unique().over("attempt_id") > 1)
        .sort("attempt_id", "_file", "_line")
        .collect()
    )
    if stamped.is_empty():
        return empty
    # Runs of one node's consecutive lines: the first line of the next run is the nearest
    # line below them that another node printed.
    keys = ["attempt_id", "_file", "_run"]
    runs = stamped.with_columns(
        (pl.col("node") != pl.col("node").shift(1)).fill_null(True).cum_sum().over("attempt_id", "_file").alias("_run")
    )
    below = runs.group_by(keys).agg(
        pl.col("ts").first().alias("_below_ts"), pl.col("node").first().alias("_below_node")
    ).with_columns(pl.col("_run") - 1)
    ahead = (
        runs.join(below, on=keys)
        .with_columns((pl.col("ts") - pl.col("_below_ts")).alias("_ahead"))
        .filter(pl.col("_ahead") > skew)
        .join(placed.select("attempt_id", "node"), on=["attempt_id", "node"], how="anti")
    )
    past_end = stamped.group_by("attempt_id", "node").agg(
        (pl.col("ts").max() > pl.col("end_ts").first() + skew).alias("_past"))
    return (
        ahead.group_by("attempt_id", "node").agg(
            pl.len().alias("_lines"), pl.col("_below_node").n_unique().alias("_peers"),
            pl.col("_ahead").median().alias("_offset"),
            pl.col("ts").sort_by("_ahead", "origin").last().alias("_launch"),
            pl.col("_below_ts").sort_by("_ahead", "origin").last().alias("_median"),
            pl.col("origin").sort_by("_ahead", "origin").last().alias("origin"),
        )
        .join(past_end, on=["attempt_id", "node"])
        .filter((pl.col("_lines") >= OUTPUT_CLOCK_LINES) & ((pl.col("_peers") > 1) | pl.col("_past")))
        .with_columns(pl.lit(None, dtype=pl.String).alias("_step"), pl.lit("app").alias("source"))
        .select(empty.columns)
        .cast(empty.schema)
        .sort("attempt_id", "node")
    )


def clock_notes(offsets: pl.DataFrame, attempts: pl.DataFrame, like: pl.DataFrame) -> pl.DataFrame:
    """One context event per (attempt, node) of :func:`clock_offsets` and
    :func:`output_clock_offsets`, for the evidence: by how much the node's lines were
    moved, and the stamps that say so. Columns of ``like`` (the events) plus the attempt
    columns."""
    seconds = pl.col("_offset").dt.total_milliseconds() / 1000
    stamp = "%Y-%m-%dT%H:%M:%S%.3fZ"
    direction = pl.when(seconds > 0).then(pl.lit("ahead of")).otherwise(pl.lit("behind"))
    launched = pl.format(
        "clock of {} runs {} s {} its peers' (slurmd launched step {} there at {}, elsewhere at {}): its lines "
        "are moved by that much", pl.col("node"), seconds.abs().round(1), direction, pl.col("_step"),
        pl.col("_launch").dt.strftime(stamp), pl.col("_median").dt.strftime(stamp),
    )
    printed = pl.format(
        "clock of {} runs at least {} s {} its peers' (the job's output holds its line stamped {} above another "
        "node's stamped {}): its lines are moved by that much", pl.col("node"), seconds.abs().round(1), direction,
        pl.col("_launch").dt.strftime(stamp), pl.col("_median").dt.strftime(stamp),
    )
    step = pl.when(pl.col("_step").is_not_null()).then(pl.concat_str([pl.lit('","step":"'), pl.col("_step")]))
    notes = offsets.join(attempts.select(ATTEMPT_COLUMNS), on="attempt_id").select(
        *ATTEMPT_COLUMNS, "node", "origin", "source", pl.col("_median").alias("ts"),
        pl.when(pl.col("_step").is_not_null()).then(launched).otherwise(printed).alias("message"),
        pl.concat_str([pl.lit('{"offset_s":"'), seconds.round(3).cast(pl.String), step, pl.lit('"}')],
                      ignore_nulls=True).alias("params"),
        pl.lit("line").alias("ts_source"),
    )
    columns = like.columns + [c for c in ATTEMPT_COLUMNS if c not in like.columns]
    schema = {**like.schema, **attempts.select(ATTEMPT_COLUMNS).schema}
    built = new_events(notes, pl.DataFrame(schema={c: schema[c] for c in columns}), rule_id=CLOCK_OFFSET_RULE,
                       event="host.clock_offset", domain="host", cause="host.clock_offset", role="context", action="none")
    return built.select(columns)


WINDOW_BUCKET = "1d"
"""Granularity of the interval join between node events and attempt windows: a day keeps
the exploded windows small for long, wide jobs (512 nodes × a week is 3,584 rows)."""


def node_day_windows(
    attempts: pl.DataFrame, lookback: timedelta, grace: timedelta, columns: list[str],
    offsets: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per (attempt, node, day) the attempt's window ``[start - lookback,
    end + grace]`` touches, with the window as ``lo``/``hi`` and the day as ``bucket``.
    With ``offsets`` (:func:`clock_offsets`) a node's window lies on its own clock, moved
    by its ``_offset`` (kept, null elsewhere).

    Joining node events on ``(cluster, node, bucket)`` and then checking the exact bounds
    (:func:`in_windows`) is an interval join whose intermediate size follows the attempts
    a node ran that day, not every attempt it ever ran: a plain join on the node would
    pair each of a node's events with each of its attempts, which at a fleet's scale is
    billions of rows.
    """
    windows = (
        attempts.select(
            *columns,
            pl.col("nodes").alias("node"),
            (pl.col("start_ts") - lookback).alias("lo"),
            (pl.col("end_ts") + grace).alias("hi"),
        )
        .explode("node")
        .drop_nulls("node")
    )
    if offsets is not None and offsets.height:
        shift = pl.col("_offset").fill_null(timedelta(0))
        windows = windows.join(offsets.select("attempt_id", "node", "_offset"), on=["attempt_id", "node"], how="left",
                               maintain_order="left").with_columns(pl.col("lo") + shift, pl.col("hi") + shift)
    else:
        windows = windows.with_columns(pl.lit(None, dtype=pl.Duration("us")).alias("_offset"))
    return windows.with_columns(
        pl.datetime_ranges(pl.col("lo").dt.truncate(WINDOW_BUCKET), pl.col("hi"), WINDOW_BUCKET).alias("bucket")
    ).explode("bucket")


def in_windows(events: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``events`` (with ``cluster``, ``node``, ``ts``) joined to the
    :func:`node_day_windows` whose ``[lo, hi]`` holds them: one row per event and window,
    with the window's columns."""
    return (
        events.with_columns(pl.col("ts").dt.truncate(WINDOW_BUCKET).alias("bucket"))
        .join(windows, on=["cluster", "node", "bucket"], how="inner")
        .filter((pl.col("ts") >= pl.col("lo")) & (pl.col("ts") <= pl.col("hi")))
    )


PRECISE_TS = ("line", "monotonic")
"""``ts_source`` values that say when the line was printed (not a lower bound)."""


def add_time_bounds(events: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """Add ``ts_hi``: the latest moment each event can have happened.

    A line stamped by its writer happened at ``ts``. A line that inherited the previous
    stamp of its file (``inferred``) or got the ingest time happened at ``ts`` or later,
    but before the next stamped event of the same file, and before the attempt ended.
    Ordering roots by ``ts_hi`` lets precisely stamped kernel evidence win over unstamped
    application lines that merely inherited an early stamp.
    """
    # The look-ahead runs on a narrow frame of the unstamped lines only; the wide events
    # keep their order and only gain the result.
    precise = pl.col("ts_source").is_in(PRECISE_TS).fill_null(False)
    narrow = events.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
        "attempt_id", "ts",
        pl.col("origin").str.replace(r":\d+$", "").alias("_file"),
        pl.col("origin").str.extract(r":(\d+)$").cast(pl.Int64).alias("_line"),
        precise.alias("_precise"),
    ).filter(pl.col("_line").is_not_null())
    stamped = (
        narrow.filter(pl.col("_precise"))
        .select("attempt_id", "_file", "_line", pl.col("ts").alias("_next_ts"))
        .sort("_line")
    )
    following = narrow.filter(~pl.col("_precise")).sort("_line").join_asof(
        stamped, on="_line", by=["attempt_id", "_file"], strategy="forward", allow_exact_matches=False,
        check_sortedness=False,
    ).select("_row", "_next_ts")
    next_ts = (
        pl.DataFrame({"_row": pl.int_range(events.height, dtype=pl.UInt32, eager=True)})
        .join(following, on="_row", how="left", maintain_order="left")["_next_ts"]
    )
    latest = pl.min_horizontal(pl.lit(next_ts), pl.col("end_ts") + skew)
    return events.with_columns(
        pl.when(precise).then(pl.col("ts")).otherwise(pl.max_horizontal(pl.col("ts"), latest)).alias("ts_hi")
    )


def selector_expr(selector: Selector) -> pl.Expr:
    """A boolean expression true for events the selector matches (all given lists)."""
    checks = [
        pl.col(column).is_in(values)
        for column, values in (
            ("event", selector.events),
            ("domain", selector.domains),
            ("role", selector.roles),
            ("cause", selector.causes),
            ("rule_id", selector.rules),
        )
        if values
    ]
    return pl.all_horizontal(checks)


def _pairs(
    events: pl.DataFrame, first: Selector, second: Selector, scope: str,
    reach_back: timedelta, reach_ahead: timedelta, skew: timedelta,
) -> pl.DataFrame:
    """For every event matching ``second``, the earliest other event matching ``first`` in
    the same scope that may lie within ``[ts - reach_back, ts + reach_ahead]`` of it (the
    bounds allow for events known only within ``[ts, ts_hi]``).

    A ``first`` event stamped after its attempt ended (beyond ``skew``) takes no role from
    another: the decision could never pick it as the attempt's root (a node whose clock
    runs far ahead puts its own XID there), so the line it would outrank keeps its role.

    An as-of join per scope, not a cross product: a 512-node job has thousands of symptoms
    and hundreds of root candidates, and pairing them all does not fit in memory. Returns
    ``_row`` (the second side's row, see :func:`_with_rows`), ``event_id_a`` and ``ts_a``
    (first side).
    """
    keys = SCOPE_KEYS[scope]
    in_time = (pl.col("ts") <= pl.col("end_ts") + skew).fill_null(True)
    # Lazy: only the few columns read are gathered for the rows kept, never the wide rows.
    firsts = (
        events.lazy().filter(selector_expr(first) & in_time)
        .select(keys + [pl.col("event_id").alias("event_id_a"), pl.col("ts").alias("ts_a"),
                        pl.col("ts_hi").alias("ts_hi_a")])
        .drop_nulls(keys)
        .sort("ts_hi_a", "ts_a", "event_id_a")
        .collect()
    )
    seconds = (
        events.lazy().filter(selector_expr(second))
        .select(keys + ["_row", "event_id", "ts", "ts_hi", (pl.col("ts") - reach_back).alias("_from")])
        .drop_nulls(keys)
        .sort("_from")
        .collect()
    )
    return (
        seconds.join_asof(firsts, left_on="_from", right_on="ts_hi_a", by=keys, strategy="forward",
                          check_sortedness=False)
        .filter(
            pl.col("event_id_a").is_not_null()
            & (pl.col("event_id") != pl.col("event_id_a"))
            & (pl.col("ts_a") <= pl.col("ts_hi") + reach_ahead)
        )
        .select("_row", "event_id_a", "ts_a")
    )


def _relabel(events: pl.DataFrame, pairs: list[pl.DataFrame], role: str, only_roots: bool) -> pl.DataFrame:
    """Give every second-side event of ``pairs`` the ``role`` and link it (``caused_by``)
    to its earliest first-side event; ``only_roots`` re-labels root candidates only."""
    link = (
        pl.concat(pairs)
        .group_by("_row")
        .agg(pl.col("event_id_a").sort_by(["ts_a", "event_id_a"]).first().alias("_link"))
    )
    linked = pl.col("_link").is_not_null()
    if only_roots:
        linked = linked & (pl.col("role") == "root_candidate")
    return (
        events.join(link, on="_row", how="left", maintain_order="left")
        .with_columns(
            pl.when(linked).then(pl.lit(role)).otherwise(pl.col("role")).alias("role"),
            pl.coalesce("caused_by", "_link").alias("caused_by"),
        )
        .drop("_link", "_row")
    )


PAIR_COLUMNS = ["_row", "attempt_id", "node", "gpu", "port", "event_id", "ts", "ts_hi", "end_ts",
                "event", "domain", "role", "cause", "rule_id"]
"""The columns :func:`_pairs` reads."""


def _pair_candidates(events: pl.DataFrame, sides: list[tuple[Selector, Selector]]) -> pl.DataFrame:
    """The rows of ``events`` (with ``_row``) some selector of ``sides`` matches, in the
    columns :func:`_pairs` reads, filtered once for a set of rules instead of twice per rule
    over the wide frame (precedence reads few rows: root candidates and what outranks them)."""
    wanted = pl.any_horizontal(selector_expr(s) for side in sides for s in side)
    return events.lazy().filter(wanted).select(PAIR_COLUMNS).collect()


def _with_rows(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with ``_row``, each row's index: a correlated event is one row per
    (attempt, event), and one integer key joins far cheaper than those two strings."""
    return events.with_row_index("_row")


def _as_roots(selector: Selector) -> Selector:
    """A selector restricted to root candidates unless it names roles itself."""
    return selector if selector.roles else selector.model_copy(update={"roles": ["root_candidate"]})


def apply_suppress(events: pl.DataFrame, rules: list[SuppressRule], skew: timedelta) -> pl.DataFrame:
    """Re-label cascades: an event matching a rule's ``cascade`` selector that follows a
    root candidate matching its ``root`` selector within the window (same scope) becomes a
    ``cascade`` and records the earliest such root in ``caused_by`` (roots stamped after
    the attempt ended beyond ``skew`` excepted, see :func:`_pairs`).

    Rules see the roles as extracted (one rule's demotions do not feed another's roots),
    which keeps the outcome independent of rule order.
    """
    if events.is_empty() or not rules:
        return events
    events = _with_rows(events)
    sides = [(_as_roots(rule.root), rule.cascade) for rule in rules]
    candidates = _pair_candidates(events, sides)
    pairs = []
    for rule, (root, cascade) in zip(rules, sides, strict=True):
        window = timedelta(seconds=parse_duration(rule.window))
        before = timedelta(seconds=parse_duration(rule.before))
        # A cascade follows its root within the window (stamped up to ``before`` earlier
        # for clock skew); either may be known only within [ts, ts_hi].
        pairs.append(_pairs(candidates, root, cascade, rule.scope, window, before, skew))
    return _relabel(events, pairs, "cascade", only_roots=False)


def relink_orphaned_cascades(
    events: pl.DataFrame, rules: list[SuppressRule], skew: timedelta, inferred: Sequence[str] = (),
) -> pl.DataFrame:
    """A cascade whose root is no root candidate once every rule has run follows the
    ``suppress`` rules again, to the roots still standing that a line reported: suppress
    links a cascade to the earliest root in its window, and a later rule may find that one
    no root of the attempt (a flap that had recovered long before, the previous job's fault
    in the ``lookback``), which would leave the attempt's real root uncorroborated by the
    cascades it caused. A root a python rule inferred (``inferred``: their rule ids) takes
    only the cascades that rule linked itself. A cascade no standing root explains keeps
    its link (only its role is read)."""
    if events.is_empty() or not rules:
        return events
    # Narrow frames: the wide rows are never gathered for this check.
    narrow = events.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), "attempt_id", "event_id", "role",
                           "caused_by")
    roots = narrow.filter(pl.col("role") == "root_candidate").select("attempt_id", pl.col("event_id").alias("_at"))
    orphans = (
        narrow.filter((pl.col("role") == "cascade") & pl.col("caused_by").is_not_null())
        .select("_row", "attempt_id", pl.col("caused_by").alias("_at"))
        .join(roots, on=["attempt_id", "_at"], how="anti")
    )
    if orphans.is_empty():
        return events
    sides = [(_as_roots(rule.root), rule.cascade) for rule in rules]
    # Only the attempts with orphans are paired again (few: most roots stand).
    concerned = _with_rows(events).filter(pl.col("attempt_id").is_in(orphans["attempt_id"].unique().implode()))
    candidates = _pair_candidates(concerned, sides).filter(~pl.col("rule_id").is_in(list(inferred)))
    pairs = [
        _pairs(candidates, root, cascade, rule.scope, timedelta(seconds=parse_duration(rule.window)),
               timedelta(seconds=parse_duration(rule.before)), skew)
        for rule, (root, cascade) in zip(rules, sides, strict=True)
    ]
    link = (
        pl.concat(pairs).join(orphans.select("_row"), on="_row", how="semi")
        .group_by("_row").agg(pl.col("event_id_a").sort_by(["ts_a", "event_id_a"]).first().alias("_link"))
    )
    if link.is_empty():
        return events
    return events.with_columns(events["caused_by"].scatter(link["_row"], link["_link"]))


def apply_precedence(events: pl.DataFrame, rules: list[PrecedenceRule], skew: timedelta) -> pl.DataFrame:
    """Where a ``prefer`` event and an ``over`` root candidate meet in one scope within the
    window (either order), the ``over`` event becomes a ``confirmation`` of the preferred
    (preferred events stamped after the attempt ended beyond ``skew`` excepted, see
    :func:`_pairs`)."""
    if events.is_empty() or not rules:
        return events
    events = _with_rows(events)
    sides = [(rule.prefer, _as_roots(rule.over)) for rule in rules]
    candidates = _pair_candidates(events, sides)
    pairs = []
    for rule, (prefer, over) in zip(rules, sides, strict=True):
        window = timedelta(seconds=parse_duration(rule.window))
        pairs.append(_pairs(candidates, prefer, over, rule.scope, window, window, skew))
    return _relabel(events, pairs, "confirmation", only_roots=True)


LINK_DOWN_CAUSES = ("network.link_down", "network.link_flap", "network.nic_tx_timeout")
"""Causes of a port or NIC that stopped passing traffic and may come back: a link-down, the
port error NCCL's async thread reports, a transmit queue the driver reset."""
LINK_UP_CAUSE = "network.link_up"
LUSTRE_LOST_EVENT = "storage.lustre_connection_lost"
LUSTRE_RESTORED_EVENT = "storage.lustre_connection_restored"


def _outage(down: bool) -> pl.Expr:
    """Which kind of outage an event opens (``down``) or closes: ``link`` (a port's
    link-down / link-up, by cause) or ``lustre`` (a client's lost / restored connection)."""
    link = pl.col("cause").is_in(LINK_DOWN_CAUSES) if down else pl.col("cause") == LINK_UP_CAUSE
    lustre = LUSTRE_LOST_EVENT if down else LUSTRE_RESTORED_EVENT
    return (
        pl.when(link).then(pl.lit("link"))
        .when(pl.col("event") == lustre).then(pl.lit("lustre"))
        .alias("_outage")
    )


FELT_WITHIN = timedelta(minutes=2)
"""An attempt that started failing this soon after an outage ended felt it: a flap under
traffic exhausts NCCL's IB retries within seconds, and the ranks abort before anyone logs
a NET/IB error (a launcher that shows only local rank 0)."""


def demote_recovered_outages(events: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """A port that went down and came back up, or a Lustre connection lost and restored,
    more than :data:`FELT_WITHIN` before the attempt started failing is not its root cause:
    such root candidates become ``context`` — unless errors the application reported were
    tied to it, or to another outage of its node, as their confirmations (NCCL's
    ``NET/IB`` retry errors: the flap did break the job's traffic, though the watchdog
    noticed only later).

    "Started failing" is the first cascade of the attempt (:func:`failing_since`: printed
    once it had started), or its end when it has none. A
    cascade that reports a timeout (``timeout_ms`` in its params: the NCCL watchdog's
    ``Timeout(ms)``) started failing that long before it was printed: a collective that hung
    while the port flapped is noticed only when the timeout runs out. The recovery must be
    on the same node and port (a link-up of cause ``network.link_up``: the kernel's, or
    NCCL's ``port active``; a Lustre ``Connection restored``); an outage that names no port
    (NCCL's ``Got async event : port error`` of older releases, a transmit timeout of a
    netdev) is closed by a link-up of any port of its node.
    """
    if events.is_empty():
        return events
    is_down = _outage(down=True).is_not_null() & (pl.col("role") == "root_candidate")
    if not events.select(is_down.any()).item():
        return events
    events = _with_rows(events)
    downs = events.filter(is_down).with_columns(_outage(down=True))
    # Only attempts with an outage need to know when they started failing.
    failing = failing_since(events.join(downs.select("attempt_id").unique(), on="attempt_id", how="semi"), skew=skew)
    ups = events.filter(_outage(down=False).is_not_null()).select(
        "attempt_id", "node", pl.col("port").alias("_up_port"), _outage(down=False), pl.col("ts").alias("_up")
    )
    # A confirmed outage keeps every outage of its node in the attempt: the kernel reports
    # one flap at the netdev and at the HCA port, and the errors link to one of them. An
    # error printed only after the link had been back for FELT_WITHIN cannot be the flap's
    # doing (NCCL gives up on an unanswered send within seconds): precedence links it to the
    # attempt's earliest outage within its window, which may be another node's flap that
    # recovered long before.
    confirmed = (
        events.filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
        .select("attempt_id", pl.col("caused_by").alias("event_id"), pl.col("ts").alias("_confirmed"))
        .join(downs.select("attempt_id", "event_id", "node"), on=["attempt_id", "event_id"])
        .group_by("attempt_id", "node").agg(pl.col("_confirmed").min())
    )
    felt = (pl.col("_confirmed") <= pl.col("_up") + FELT_WITHIN).fill_null(False)
    recovered = (
        downs.select("_row", "attempt_id", "node", "port", "_outage", "event_id", "ts")
        .join(ups, on=["attempt_id", "node", "_outage"], how="inner", nulls_equal=True)
        .filter(pl.col("port").is_null() | pl.col("port").eq_missing(pl.col("_up_port")))
        .join(failing, on="attempt_id")
        .filter((pl.col("_up") >= pl.col("ts")) & (pl.col("_up") + FELT_WITHIN < pl.col("_failing")))
        .join(confirmed, on=["attempt_id", "node"], how="left", nulls_equal=True)
        .filter(~felt)
        ["_row"]
    )
    return _to_context(events, events["_row"].is_in(recovered.implode())).drop("_row")


HANG_MARGIN = timedelta(minutes=1)
"""How long after the hung collective began a fault may still have hung it: the collective
was already running (a large all-reduce takes seconds) when the fault struck."""


GPU_DOMAINS = ("gpu", "gpu_memory", "nvlink")
"""The domains of a GPU's own faults (:func:`demote_roots_after_the_hang`)."""

NOTICED_LATE = ("host.node_failure", "storage.filesystem_unavailable")
"""Causes whose reports are stamped when a timeout ran out, not when the fault began
(:func:`demote_roots_after_the_hang`): Slurm reports a node that fell silent only after
``SlurmdTimeout`` (300 s by default), often after the peers' NCCL watchdogs fired; a
Lustre client reports its lost target after an RPC timeout (100 s and more), an NFS client
its server after the major timeout (about 180 s with the default ``timeo`` and
``retrans``), while the rank writing the checkpoint has been stuck all along."""


def demote_roots_after_the_hang(events: pl.DataFrame) -> pl.DataFrame:
    """An infrastructure root candidate stamped more than :data:`HANG_MARGIN` after the
    collective that timed out began (the latest moment a watchdog cascade can have been
    printed, its ``ts_hi``, minus its ``Timeout(ms)``: an unstamped one inherited an earlier
    stamp) cannot have hung it: the job was already stuck (rank 0 still tokenising, a deadlock),
    and a link that flapped thirteen minutes into the wait is ``context``. The stuck rank is
    then named by the python rules (``straggler.py``). A workload root printed late stays:
    it may report the stall itself (``DataLoader timed out after 300 seconds``). A report of
    how long the fault had lasted when it was printed (a CPU "stuck for 74s") dates it by
    its onset (:func:`_onset`).

    A GPU's fault on a node where a rank reported no timeout (fewer of its ranks than of
    another node's, or none) stays: that rank is the one the others waited for, and its
    GPU failing is why, whatever the node's clock says (one running minutes ahead, with no
    launch line to place it, stamps the fault after the hang began). Nor does a report made
    when a timeout ran out (:data:`NOTICED_LATE`: a node the scheduler lost, a filesystem
    that stopped answering): it dates the notice, and the fault began before it."""
    if events.is_empty():
        return events
    # Narrow frames: only a few rows report a timeout, and only root candidates can move.
    timeouts = (
        events.select("attempt_id", "node", "rank", "ranks", "role", "params", "ts_hi")
        .filter(_reports_timeout())
        .filter(_timeout_ms().is_not_null())
    )
    hung = timeouts.group_by("attempt_id").agg(_cascade_began("ts_hi").min().alias("_hung"))
    if hung.is_empty():
        return events
    reporting = (
        timeouts.drop_nulls("node")
        .select("attempt_id", "node", pl.coalesce(pl.col("ranks"), pl.concat_list("rank")).alias("_r"))
        .explode("_r").group_by("attempt_id", "node").agg(pl.col("_r").n_unique().alias("_reported"))
    )
    most = reporting.group_by("attempt_id").agg(pl.col("_reported").max().alias("_most"))
    candidate = (
        (pl.col("role") == "root_candidate") & pl.col("domain").is_in(INFRASTRUCTURE)
        & ~pl.col("cause").is_in(NOTICED_LATE)
    )
    waited_for = pl.col("domain").is_in(GPU_DOMAINS) & (pl.col("_reported").fill_null(0) < pl.col("_most"))
    late = (
        events.select("attempt_id", "node", "domain", _onset().alias("_onset"), candidate=candidate)
        .join(hung, on="attempt_id", how="left", maintain_order="left")
        .join(reporting, on=["attempt_id", "node"], how="left", maintain_order="left")
        .join(most, on="attempt_id", how="left", maintain_order="left")
        .select(pl.col("candidate") & (pl.col("_onset") > pl.col("_hung") + HANG_MARGIN).fill_null(False)
                & ~waited_for.fill_null(False))
        .to_series()
    )
    return _to_context(events, late)


STUCK_S = r'"stuck_s": ?"?([0-9]+)'
"""The ``stuck_s`` value of a params JSON object (a soft lockup's "stuck for 74s"), as group 1."""


def _onset() -> pl.Expr:
    """When an event's fault began: its stamp, less the time a report says the fault had
    lasted by then (``stuck_s``: the kernel reports a CPU stuck for 74 s when it has been
    stuck that long)."""
    stuck = pl.col("params").str.extract(STUCK_S, 1).cast(pl.Int64, strict=False).fill_null(0)
    return pl.col("ts") - pl.duration(seconds=stuck)


def _to_context(events: pl.DataFrame, mask: pl.Series) -> pl.DataFrame:
    """``events`` with the rows ``mask`` selects given the role ``context``."""
    return events.with_columns(pl.when(mask).then(pl.lit("context")).otherwise(pl.col("role")).alias("role"))


def _reports_timeout() -> pl.Expr:
    """Whether an event's params carry a ``timeout_ms`` (NCCL's watchdog reports): a
    literal search, cheap over every row, before :func:`_timeout_ms` parses the few."""
    return pl.col("params").str.contains('"timeout_ms"', literal=True).fill_null(False)


def _timeout_ms() -> pl.Expr:
    """A cascade's reported timeout (``timeout_ms`` in its params, the NCCL watchdog's
    ``Timeout(ms)``); null for other rows (only cascades' params are parsed)."""
    cascade = pl.col("role") == "cascade"
    # A regex reads the one key several times faster than a JSON path; params are JSON
    # objects whose values are strings (extracted groups) or numbers.
    return pl.when(cascade).then(pl.col("params")).str.extract(TIMEOUT_MS, 1).cast(pl.Int64, strict=False)


TIMEOUT_MS = r'"timeout_ms": ?"?(-?[0-9]+)'
"""The ``timeout_ms`` value of a params JSON object, as group 1."""


def _cascade_began(printed: str = "ts") -> pl.Expr:
    """When a cascade's failure began: a cascade that reports a timeout (``timeout_ms`` in
    its params, the NCCL watchdog's ``Timeout(ms)``) began that long before it was printed.
    ``printed`` is ``ts`` (the earliest moment the line can have been printed) or ``ts_hi``
    (the latest: an unstamped line lies anywhere up to the next stamped one)."""
    return pl.col(printed) - pl.duration(milliseconds=_timeout_ms().fill_null(0))


def failing_since(events: pl.DataFrame, *roots: pl.Expr, skew: timedelta = timedelta(0)) -> pl.DataFrame:
    """``attempt_id`` and ``_failing``: when each attempt of ``events`` started failing — its
    first cascade (:func:`_cascade_began`), the first of the events ``roots`` selects, or
    its end, whichever is first.

    A cascade printed before the attempt started (by more than ``skew``) is not its own: an
    attempt cannot fail before it runs, and a node's lines from its ``lookback`` window hold
    the teardown of the job before it there (XID 45 as that job's processes were killed)."""
    cascade = (pl.col("role") == "cascade") & (pl.col("ts_hi") >= pl.col("start_ts") - skew).fill_null(True)
    firsts = [_cascade_began().filter(cascade).min(), *(pl.col("ts").filter(r).min() for r in roots)]
    return events.group_by("attempt_id").agg(pl.min_horizontal(*firsts, pl.col("end_ts").first()).alias("_failing"))


def demote_outlived_prestart_roots(events: pl.DataFrame, fail_at_once: timedelta, skew: timedelta) -> pl.DataFrame:
    """A root candidate stamped before its attempt started (the ``lookback`` window) is the
    root only of an attempt that started failing within ``fail_at_once`` of its start: a
    GPU that fell off the bus before the job landed fails it at once. An attempt that ran
    longer than that had working hardware after the event (a NIC's transmit timeout the
    driver recovered from, a link that came back), so for it the event is ``context``.

    "Started failing" is the attempt's first cascade, its first root candidate stamped
    after its start, or its end (:func:`failing_since`).
    """
    if events.is_empty():
        return events
    root = pl.col("role") == "root_candidate"
    early = root & (pl.col("ts_hi") < pl.col("start_ts") - skew)
    if not events.select(early.any()).item():
        return events
    later = root & (pl.col("ts_hi") >= pl.col("start_ts") - skew)
    suspects = events.filter(early)["attempt_id"].unique()
    failing = failing_since(events.filter(pl.col("attempt_id").is_in(suspects.implode())), later, skew=skew)
    outlived = (
        events.join(failing, on="attempt_id", how="left", maintain_order="left")
        .select(early & (pl.col("_failing") > pl.col("start_ts") + fail_at_once).fill_null(False))
        .to_series()
    )
    return _to_context(events, outlived)


CHAIN_HOPS = 3
"""How many confirmations deep :func:`restore_orphaned_confirmations` follows a chain to its
root (precedence rules chain at most a few events: CUDA error → XID 13 → XID 94)."""


def restore_orphaned_confirmations(events: pl.DataFrame) -> pl.DataFrame:
    """A confirmation whose preferred event is no root candidate once every rule has run
    confirms nothing: it is a root candidate again.

    Precedence makes a root candidate the ``confirmation`` of another (``caused_by``); a
    python rule may later find that other event no root of this attempt (an NVLink5 XID its
    severity marks ``Nonfatal``, an XID the previous job left on the node). The application's
    report of the fault (``CUDA error: uncorrectable ECC error``) would then leave the
    attempt without a root at all.
    """
    linked = _with_rows(events).filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
    if linked.is_empty():
        return events
    roots = events.filter(pl.col("role") == "root_candidate").select("attempt_id", pl.col("event_id").alias("_at"))
    orphans = linked.join(roots, left_on=["attempt_id", "caused_by"], right_on=["attempt_id", "_at"], how="anti")
    if orphans.is_empty():
        return events
    # A preferred event that became the confirmation of another root hands its own
    # confirmations on to that root: the CUDA error XID 13 confirmed, once the XID 94 beside
    # it on the GPU outranks the XID 13, confirms the XID 94.
    hops = linked.select("attempt_id", pl.col("event_id").alias("_at"), pl.col("caused_by").alias("_next")).unique(
        ["attempt_id", "_at"], keep="first", maintain_order=True)
    target = orphans.select("_row", "attempt_id", pl.col("caused_by").alias("_at"))
    for _ in range(CHAIN_HOPS):
        target = target.join(hops, on=["attempt_id", "_at"], how="left", maintain_order="left").select(
            "_row", "attempt_id", pl.coalesce("_next", "_at").alias("_at"))
    handed = target.join(roots, on=["attempt_id", "_at"], how="semi")
    lost = orphans.join(handed, on="_row", how="anti")
    role = events["role"].scatter(lost["_row"], "root_candidate")
    caused_by = events["caused_by"].scatter(lost["_row"], None).scatter(handed["_row"], handed["_at"])
    return events.with_columns(role, caused_by)
