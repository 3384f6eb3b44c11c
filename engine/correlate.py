"""Correlate: attach events to the attempts they can explain.

Node-scoped events (kernel, fabric, metrics: no ``attempt_id``) attach to every attempt that
ran on that node within ``[start - lookback, end + grace]`` — an interval join done as an
equi-join on ``(cluster, node)`` followed by a range filter. Application events already carry
their attempt. Node clocks that run off are read first (slurmd's launch lines, the job's
output), unstamped lines get the latest moment they can have happened, and the per-rank
copies of a cascade fold into one event. :mod:`engine.relabel` then re-labels what the
events mean by what happened around them.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from engine.config import EngineConfig
from engine.decide import CLOCK_OFFSET_RULE, reports_timeout
from engine.extract import DEDUPE_KEYS, dedupe_events, dedupe_window_s
from engine.rules.loader import RulePack
from engine.rules.python_rules import attempt_job_id, new_events, origin_position, param

ATTEMPT_COLUMNS = ["attempt_id", "cluster", "job_id", "user", "state", "start_ts", "end_ts"]
"""Attempt columns carried on every correlated event (what python rules may rely on)."""



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
    # move back onto the attempt's (those after a step of its clock by what is left).
    on_nodes = in_windows(node_events, windows)
    if offsets.height:
        on_nodes = through_clock_steps(on_nodes, offsets)
    shift = pl.col("_offset").fill_null(timedelta(0))
    on_nodes = on_nodes.with_columns((pl.col("ts") - shift).alias("ts"), (pl.col("last_ts") - shift).alias("last_ts"))
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
    # Only the attempts with a node placed off are read, and only the moved rows' keys are
    # joined: the job's lines of every other attempt pass through untouched.
    placed_off = offsets["attempt_id"].unique().implode()
    timeouts = (
        app_events.lazy().filter(pl.col("attempt_id").is_in(placed_off))
        .filter(reports_timeout() & (pl.col("ts_source") == "line") & pl.col("node").is_not_null())
        .group_by("attempt_id", "node").agg(pl.col("ts").median().alias("_seen"))
        .collect()
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
    shift = app_events.select("attempt_id", "node").join(
        moved, on=["attempt_id", "node"], how="left", maintain_order="left")["_offset"]
    own = pl.col("_offset").is_not_null() & (pl.col("ts_source") == "line")
    return app_events.with_columns(shift).with_columns(
        pl.when(own).then(pl.col("ts") - pl.col("_offset")).otherwise(pl.col("ts")).alias("ts"),
        pl.when(own).then(pl.col("last_ts") - pl.col("_offset")).otherwise(pl.col("last_ts")).alias("last_ts"),
    ).drop("_offset")


CLOCK_STEP_EVENT = "host.clock_step"
"""chronyd's step of a node's clock (``host.clock_step``: "System clock was stepped by N
seconds", the seconds added to the clock)."""


def through_clock_steps(events: pl.DataFrame, offsets: pl.DataFrame) -> pl.DataFrame:
    """``events`` inside node windows (:func:`in_windows`, each with its node's
    ``_offset``), the offset of each line its node logged on the other side of a clock step
    (:data:`CLOCK_STEP_EVENT`) from the line its offset was read at changed by the step.

    chronyd steps a clock that is far off and says by how much: the clock reads the step's
    seconds more after it than before (its own line is stamped on the new clock). A
    node's offset was read at ``_launch`` (:func:`clock_offsets`, :func:`output_clock_offsets`,
    on the node's own clock): a line of the same file after a step that came after that
    moment is off by the offset plus the step, one before a step that came before it by the
    offset minus the step. Which side of a step a line is on is its place in its file; its
    stamp cannot say, as a step back repeats stamps."""
    steps = events.filter((pl.col("event") == CLOCK_STEP_EVENT) & pl.col("_offset").is_not_null())
    if steps.is_empty():
        return events
    seconds = param("step_s").cast(pl.Float64, strict=False)
    steps = (
        steps.select("attempt_id", "node", *origin_position(), "ts",
                     (seconds * 1_000_000).round().cast(pl.Int64).cast(pl.Duration("us")).alias("_step"))
        .drop_nulls(["_line", "_step"])
        .unique(["attempt_id", "node", "_file", "_line"])
        .sort("attempt_id", "node", "_file", "_line")
    )
    by_launch = (
        steps.join(offsets.select("attempt_id", "node", "_launch"), on=["attempt_id", "node"])
        .filter(pl.col("ts") <= pl.col("_launch"))
        .group_by("attempt_id", "node").agg(pl.col("_step").sum().alias("_by_launch"))
    )
    stepped = steps.select(
        "attempt_id", "node", "_file", "_line", pl.col("_step").cum_sum().over("attempt_id", "node", "_file").alias("_stepped"))
    # Only the lines of the nodes that logged a step are looked up.
    moved = (
        events.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), "attempt_id", "node", *origin_position())
        .join(steps.select("attempt_id", "node").unique(), on=["attempt_id", "node"], how="semi")
        .drop_nulls("_line")
        .sort("_line")
        .join_asof(stepped.sort("_line"), on="_line", by=["attempt_id", "node", "_file"], strategy="backward",
                   check_sortedness=False)
        .join(by_launch, on=["attempt_id", "node"], how="left")
        .select("_row", (pl.col("_stepped").fill_null(timedelta(0)) - pl.col("_by_launch").fill_null(timedelta(0)))
                .alias("_moved"))
    )
    return (
        events.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
        .join(moved, on="_row", how="left", maintain_order="left")
        .with_columns(pl.col("_offset") + pl.col("_moved").fill_null(timedelta(0)))
        .drop("_row", "_moved")
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
    the median of them runs that far off, provided most of the nodes lie within ``skew`` of
    it (with half of them on another clock the median is neither's). The step reported by most nodes decides (the
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
    offset = pl.col("_launch") - pl.col("_median")
    return (
        launches.join(steps, on=["attempt_id", "_step"])
        .with_columns(offset.alias("_offset"))
        # The median is the peers' clock only when most of them agree on it: half the nodes
        # on another zone put it between two groups, and every node would move.
        .filter((pl.col("_offset").abs() <= skew).sum().over("attempt_id") * 2 > pl.col("_peers"))
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
        .select("attempt_id", "node", "ts", "origin", "end_ts", *origin_position())
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
        "attempt_id", "ts", *origin_position(), precise.alias("_precise"),
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
