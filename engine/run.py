"""The run orchestrator: scope → collect → extract → correlate → decide → fleet → write.

One call of :func:`run_attribution` attributes every attempt that ended in a window of UTC
days, replaces those days' verdicts in ``results/`` (a rerun never appends), rewrites the
derived ``events/`` partitions it extracted, and writes a run manifest.

Memory stays bounded whatever the window holds: attempts are attributed in chunks of
consecutive end days (about ``chunk_attempts`` each); each observation day is extracted
once, written to ``events/`` at once and kept in memory only while a later chunk still
needs it; with several chunks, each chunk's verdicts go to a scratch folder in the lake and
only a slim view of them (no evidence trails) stays for the fleet stage, whose notes are
applied as the verdicts are written.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cached_property
from pathlib import Path

import polars as pl

from engine.config import EngineConfig
from engine.correlate import attach_events, in_windows, node_day_windows, split_launch_lines
from engine.decide import decide, state_table
from engine.extract import lake_events, landing_derivation
from engine.fleet import HISTORY_COLUMNS, apply_fleet_notes, fleet_notes, slim_view
from engine.metrics import metric_events
from engine.relabel import (
    apply_precedence, apply_suppress, demote_outlived_roots, demote_recovered_outages,
    demote_roots_after_the_hang, relink_orphaned_cascades, restore_orphaned_confirmations,
)
from engine.rules.loader import RulePack, load_rule_pack
from engine.rules.python_rules import RuleContext, no_topology, run_python_rules
from ingest.files.common import TS_DTYPE
from ingest.lake import Derivation, Lake, days_between
from ingest.schema import EVENTS, RESULTS

Progress = Callable[[str], None]


@dataclass
class RunSummary:
    """What a run did: its id, the window it worked on (:func:`run_window`), counts and
    per-stage timings (seconds).

    ``verdicts`` reads the run's results back from the lake on first use: a run over a
    million attempts never holds every verdict in memory at once.
    """

    run_id: str
    since: date
    until: date
    attempts: int
    observations: int
    events: int
    counts: pl.DataFrame
    lake: Lake
    clusters: list[str] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    unended: dict[str, int] = field(default_factory=dict)
    """Attempts of the window left out for want of an end, by state (:func:`unended_attempts`)."""

    def _results(self) -> pl.LazyFrame:
        return (
            self.lake.scan("results", clusters=self.clusters, days=days_between(self.since, self.until))
            .filter(pl.col("run_id") == self.run_id)
            .select(RESULTS.names + ["cluster"])
        )

    @cached_property
    def verdicts(self) -> pl.DataFrame:
        """The run's verdicts (results columns plus ``cluster``), by cluster, end, attempt."""
        return self._results().collect().sort(["cluster", "end_ts", "attempt_id"], nulls_last=True)

    def latest_failures(self, limit: int) -> pl.DataFrame:
        """The ``limit`` verdicts of attempts that did not succeed (domain other than
        ``none``) that ended last, in end order: what a nightly run's console shows."""
        return (
            self._results().filter(pl.col("domain") != "none")
            .sort(["end_ts", "attempt_id"], descending=True, nulls_last=True).head(limit)
            .collect().reverse()
        )

    def by_domain_quality(self) -> pl.DataFrame:
        """Verdict counts by domain and quality (the CLI's summary table)."""
        return self.counts


def run_window(lake: Lake, since: date, until: date, clusters: list[str] | None = None) -> tuple[date, date]:
    """The part of ``[since, until]`` a run works on: the window narrowed to the span of the
    lake's attempts and verdicts (of ``clusters``; from folder names, no file is read).

    No attempt ended outside that span, so a window far wider than the lake (``--since
    1900-01-01``) reads and writes what a window tight around its attempts does, with the
    same verdicts, instead of visiting every day. A window that holds no attempt is
    narrowed to the span of the lake's logs and metrics instead: the run attributes nothing
    but rewrites those days' events, which trend queries read. A window that holds neither
    stands for its first day.
    """
    for tables in (("attempts", "results"), ("observations", "metrics")):
        days = [day for table in tables for day in lake.days(table, clusters=clusters)]
        if days and min(days) <= until and max(days) >= since:
            return max(since, min(days)), min(until, max(days))
    return since, since


ENDED = pl.col("end_ts").is_not_null() & (pl.col("state") != "running")
"""An attempt a run attributes: it has an end and is no longer running."""


def scope_attempts(
    lake: Lake, since: date, until: date, clusters: list[str] | None = None
) -> pl.DataFrame:
    """Attempts that ended on a day in ``[since, until]`` (attempts are partitioned by end
    day, so this reads exactly those partitions)."""
    return (
        lake.scan("attempts", clusters=clusters, days=days_between(since, until))
        .filter(ENDED)
        .drop("day")
        .collect()
        .sort(["cluster", "attempt_id"])
    )


def unended_attempts(
    lake: Lake, since: date, until: date, clusters: list[str] | None = None
) -> dict[str, int]:
    """Attempts in the window's partitions that :func:`scope_attempts` leaves out because
    they have no end (still running, or the scheduler never said when they ended), counted
    by state. They sit in the partition of their start (or submit) day."""
    counts = (
        lake.scan("attempts", clusters=clusters, days=days_between(since, until))
        .filter(~ENDED)
        .group_by("state").len().collect()
    )
    return dict(sorted(zip(counts["state"].to_list(), counts["len"].to_list(), strict=True)))


def observation_days(
    since: date, until: date, config: EngineConfig, attempts: pl.DataFrame | None = None,
    widen: timedelta = timedelta(0),
) -> list[date]:
    """The observation day partitions a window needs: from the earliest start of its
    attempts (a job may have run for days before it ended in the window) minus the
    lookback, to the end of the window plus the grace, each end moved out by ``widen``."""
    lookback = timedelta(seconds=config.seconds("lookback")) + widen
    first = datetime.combine(since, datetime.min.time(), tzinfo=UTC) - lookback
    if attempts is not None and attempts["start_ts"].drop_nulls().len():
        first = min(first, attempts["start_ts"].min() - lookback)
    last = datetime.combine(until, datetime.max.time(), tzinfo=UTC) + timedelta(seconds=config.seconds("grace")) + widen
    return days_between(first.date(), last.date())


def coverage_days(
    since: date, until: date, config: EngineConfig, attempts: pl.DataFrame | None = None
) -> list[date]:
    """The observation days whose row counts a window's coverage reads: its
    :func:`observation_days` and the ``quiet_horizon`` around them (a quiet node's log is
    told from a missing one by its rows before and after an attempt)."""
    return observation_days(since, until, config, attempts, timedelta(seconds=config.seconds("quiet_horizon")))


def extract_day(
    lake: Lake, pack: RulePack, day: date, clusters: list[str] | None, files: list[Path] | None = None,
) -> tuple[pl.DataFrame, int]:
    """Events of one observation day (log lines and metric samples), deduplicated; the
    lines' events were mostly extracted when they landed (:func:`lake_events`). ``files``:
    the day's observations files when already listed."""
    files = lake.files("observations", clusters=clusters, days=[day]) if files is None else files
    n_obs = lake.scan_files("observations", files).select(pl.len()).collect().item()
    events = lake_events(lake, pack, files)
    metrics = lake.scan("metrics", clusters=clusters, days=[day])
    from_metrics = metric_events(metrics, pack)
    columns = EVENTS.names + ["cluster"]
    return pl.concat([events.select(columns), from_metrics.select(columns)]), n_obs


PROGRESS = r"(?i)(?-u:\b)(?:iteration|iter|step|epoch)(?-u:\b)[\s:='\x22#]{0,12}\d"
"""A training loop's report of its progress, with the ``loss`` word beside it (Megatron-LM's
``iteration 163/ 500000 | … lm loss: …``, detectron2's ``iter: 499 total_loss: …``, the
Hugging Face Trainer's ``{'loss': 0.48, …, 'epoch': 0.5}``, a script's ``step 128/60000
loss=2.59``): the moments the job was seen making progress."""


def _progress() -> pl.Expr:
    """Whether a line is a progress report (:data:`PROGRESS`) stamped by its writer."""
    message = pl.col("message")
    return (
        (pl.col("ts_source") == "line")
        & pl.when(message.str.contains("(?i)loss")).then(message.str.contains(PROGRESS)).otherwise(False)
    ).fill_null(False)


def _counts(observations: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The rows coverage is computed from, in one pass over ``observations``: node-level
    rows per ``(cluster, node, source, hour)`` (``attempt_id`` null) and rows tied to an
    attempt per ``(cluster, attempt_id, source, node)`` (``hour`` null), each per ``day``.
    An attempt's rows also say when its progress reports (:func:`_progress`) began and
    ended, in how many distinct seconds they came, and the sum of those seconds since the
    epoch (``progress_first``, ``progress_last``, ``progress_seconds``, ``progress_sum_s``;
    null and 0 without any): their mean says whether they thinned out (a job slowing down).
    Sums and counts add up over files and days."""
    lf = observations.lazy()
    per_hour = (
        lf.filter(pl.col("attempt_id").is_null())
        .group_by("cluster", "node", "source", pl.col("ts").dt.truncate("1h").alias("hour"))
        .len("rows")
        .with_columns(pl.lit(None, pl.String).alias("attempt_id"), pl.col("hour").dt.date().alias("day"),
                      *(pl.lit(None, TS_DTYPE).alias(name) for name in ("progress_first", "progress_last")),
                      pl.lit(0, pl.UInt32).alias("progress_seconds"), pl.lit(0, pl.Int64).alias("progress_sum_s"))
    )
    progress = pl.col("ts").filter("_progress")
    seconds = progress.dt.truncate("1s").unique()
    per_attempt = (
        lf.filter(pl.col("attempt_id").is_not_null())
        .with_columns(_progress().alias("_progress"))
        .group_by("cluster", "attempt_id", "source", "node", pl.col("ts").dt.date().alias("day"))
        .agg(pl.len().alias("rows"), progress.min().alias("progress_first"), progress.max().alias("progress_last"),
             seconds.len().cast(pl.UInt32).alias("progress_seconds"),
             seconds.dt.epoch("s").sum().cast(pl.Int64).alias("progress_sum_s"))
        .with_columns(pl.lit(None, TS_DTYPE).alias("hour"))
    )
    columns = ["cluster", "node", "source", "hour", "attempt_id", "rows", "progress_first", "progress_last",
               "progress_seconds", "progress_sum_s", "day"]
    # Sorted: the same lines give the same file (a hash grouping's order is not fixed).
    return pl.concat([per_hour.select(columns), per_attempt.select(columns)]).sort(columns, nulls_last=True).collect()


COUNTS = Derivation("coverage-3", "observations", _counts)
"""Coverage counts at landing: each observations file's :func:`_counts`, so that a run
never reads the lines (bump the name's number when ``_counts`` changes)."""


def landing_derivations(pack: RulePack | None = None) -> list[Derivation]:
    """What the ingest commands derive from each observations file as it lands: its events
    for ``pack`` (default the installed pack; :func:`engine.extract.landing_derivation`)
    and its coverage counts (:data:`COUNTS`). Runs with that pack read those instead of
    the lines."""
    return [landing_derivation(pack or load_rule_pack()), COUNTS]


def landing_lake(root: str | Path, pack: RulePack | None = None) -> Lake:
    """The lake at ``root``, opened to land logs as the ingest commands do
    (:func:`landing_derivations`)."""
    return Lake(root, landing_derivations(pack))


def coverage_counts(lake: Lake, files: list[Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The two kinds of counts coverage is computed from, for the observations ``files``:
    ``(cluster, node, source, hour, rows)`` and ``(cluster, attempt_id, source, node,
    rows, progress_first, progress_last, progress_seconds, progress_sum_s)``, read from the files' landed
    counts where those exist. A key may repeat (one row per file that holds it):
    :func:`coverage_from_counts` sums them, so regrouping here would only cost a pass over
    every node-hour of the day."""
    counts = lake.read_derived(COUNTS, files)
    per_hour = counts.filter(pl.col("attempt_id").is_null()).select("cluster", "node", "source", "hour", "rows")
    per_attempt = counts.filter(pl.col("attempt_id").is_not_null()).select(
        "cluster", "attempt_id", "source", "node", "rows", "progress_first", "progress_last", "progress_seconds",
        "progress_sum_s")
    return per_hour, per_attempt


def compute_coverage(
    lake: Lake, attempts: pl.DataFrame, days: list[date], config: EngineConfig,
    clusters: list[str] | None = None,
) -> pl.DataFrame:
    """Per attempt: rows each source contributed to its nodes and window, and which
    expected sources are missing (node logs for each node; the attempt's own output).
    Reads the observations of ``days`` (the attempts' :func:`coverage_days`); see
    :func:`coverage_from_counts`."""
    per_hour, per_attempt = coverage_counts(lake, lake.files("observations", clusters=clusters, days=days))
    return coverage_from_counts(attempts, per_hour, per_attempt, connector_failures(lake, attempts, config), config)


def coverage_from_counts(
    attempts: pl.DataFrame, per_hour: pl.DataFrame, per_attempt: pl.DataFrame,
    failures: pl.DataFrame, config: EngineConfig,
) -> pl.DataFrame:
    """Coverage of ``attempts`` from :func:`coverage_counts` counts (a key may repeat: its
    rows are summed) and the coverage entries of failed connectors (:func:`connector_failures`).

    Node-level counts are summed cumulatively per (cluster, node, source), so a window's
    count is two as-of lookups (the running total at its end minus the one before its
    start): the cost follows the attempts' node count, not their duration or how many
    attempts a node ran.

    A node's log covers an attempt when it has rows in the attempt's window (the hours from
    its start to its end and ``grace``; rows of its ``lookback`` only do not count), or rows both
    within ``quiet_horizon`` before it and within that after it: the log was being written
    throughout, and a quiet node (nothing to say during a healthy job) is evidence of no
    fault, not a missing source. A log that stops before the window ends (a node that
    died, a rotated file not landed) stays missing. The counts must span the
    :func:`coverage_days` of the attempts; more days change nothing.
    """
    grace = timedelta(seconds=config.seconds("grace"))
    horizon = timedelta(seconds=config.seconds("quiet_horizon"))
    # One integer key per (cluster, node, source) log: the running sums and the as-of
    # lookups group by it instead of three strings. One grouping gives the key and each
    # log's hours in order (all the running sum and the lookups need). An hour counted in
    # several rows (two files of one log landed in that hour, a rotated log and its
    # successor) needs no merging: the running sum at the last of them holds them all,
    # and a backward as-of lookup takes the last of tied hours.
    grouped = (
        per_hour.group_by("cluster", "node", "source")
        .agg(pl.col("hour").sort(), pl.col("rows").sort_by("hour"))
        .with_row_index("_log")
    )
    logs = grouped.select("_log", "cluster", "node", "source")
    per_hour = (
        grouped.select("_log", "hour", "rows").explode("hour", "rows")
        .with_columns(pl.col("rows").cum_sum().over("_log").alias("running"))
    )
    windows = attempts.select(
        "cluster", "attempt_id", pl.col("nodes").alias("node"),
        # From the hour the attempt started, not from its lookback: a log whose last line
        # came before the attempt started was not being written while it ran.
        pl.col("start_ts").dt.truncate("1h").alias("lo"),
        (pl.col("end_ts") + grace).alias("hi"),
    ).explode("node").drop_nulls("node")
    running = per_hour.select("_log", "hour", "running")

    def total_at(frame: pl.DataFrame, moment: pl.Expr, name: str) -> pl.DataFrame:
        """``frame`` with ``name``: its log's running total at ``moment`` (0 before its first row)."""
        return (
            frame.with_columns(moment.alias("_at")).sort("_at")
            .join_asof(running.rename({"running": name}), left_on="_at", right_on="hour", by="_log",
                       strategy="backward", check_sortedness=False)
            .drop("_at", "hour").with_columns(pl.col(name).fill_null(0))
        )

    before = pl.col("lo") - timedelta(microseconds=1)
    node_rows = windows.join(logs, on=["cluster", "node"])
    for moment, name in [(pl.col("hi"), "_to"), (before, "_from"), (pl.col("hi") + horizon, "_later"),
                         (before - horizon, "_earlier")]:
        node_rows = total_at(node_rows, moment, name)
    node_rows = (
        node_rows.with_columns((pl.col("_to") - pl.col("_from")).alias("rows"))
        .filter((pl.col("rows") > 0) | ((pl.col("_from") > pl.col("_earlier")) & (pl.col("_later") > pl.col("_to"))))
        .select("attempt_id", "node", "source", "rows")
    )
    by_source = pl.concat([
        node_rows.group_by("attempt_id", "source").agg(pl.col("rows").sum()),
        per_attempt.select("attempt_id", "source", "rows"),
    ]).group_by("attempt_id", "source").agg(pl.col("rows").sum())
    # Node logs tied to the attempt itself (one-shot diagnosis tags every line) count too.
    node_log_nodes = pl.concat([
        node_rows.filter(pl.col("source").is_in(config.node_log_sources)).select("attempt_id", "node"),
        per_attempt.filter(pl.col("source").is_in(config.node_log_sources)).select("attempt_id", "node"),
    ]).unique()
    missing_nodes = (
        windows.select("attempt_id", "node").unique()
        .join(node_log_nodes, on=["attempt_id", "node"], how="anti")
        .sort("attempt_id", "node")
        .group_by("attempt_id", maintain_order=True)
        .agg(pl.col("node"))
        .select(
            "attempt_id",
            pl.lit("node_logs").alias("source"),
            pl.lit(0, dtype=pl.Int64).alias("rows"),
            (pl.lit(f"no {'/'.join(config.node_log_sources)} rows for ") + pl.col("node").list.join(", ")).alias("error"),
        )
    )
    has_app = by_source.filter(pl.col("source").is_in(config.app_log_sources)).select("attempt_id").unique()
    missing_app = attempts.select("attempt_id").join(has_app, on="attempt_id", how="anti").select(
        "attempt_id",
        pl.lit("app_logs").alias("source"),
        pl.lit(0, dtype=pl.Int64).alias("rows"),
        pl.lit(f"no {'/'.join(config.app_log_sources)} output for this attempt").alias("error"),
    )
    entries = pl.concat([
        by_source.with_columns(pl.col("rows").cast(pl.Int64), pl.lit(None, dtype=pl.String).alias("error")),
        missing_nodes, missing_app, failures,
    ]).sort("attempt_id", "source")
    return (
        attempts.select("attempt_id")
        .join(
            entries.group_by("attempt_id", maintain_order=True).agg(
                pl.struct("source", "rows", "error").alias("coverage"),
                pl.col("error").is_null().all().alias("coverage_complete"),
            ),
            on="attempt_id", how="left",
        )
        .join(_progress_of(per_attempt), on="attempt_id", how="left")
    )


def _progress_of(per_attempt: pl.DataFrame) -> pl.DataFrame:
    """Per attempt with progress reports (:func:`_counts`): when the last came
    (``last_progress``), and the cadence (``progress_interval``), number
    (``progress_reports``, distinct seconds) and centre (``progress_center``: where their
    mean moment lies between the first and the last, 0 to 1) of those of the node that
    printed the most: whether the job stopped making progress long before it ended
    (:func:`engine.decide.stalled`), or slowed down (:func:`engine.decide.slowed`: reports
    at a steady cadence centre at one half, reports that thin out as the steps slow centre
    earlier), is the decide stage's question. Ranks of one node report one step in one
    second, and a node's reports may lie in several days' counts."""
    first, last, seconds = pl.col("progress_first"), pl.col("progress_last"), pl.col("progress_seconds")
    total = pl.col("progress_sum_s")
    span = last.dt.epoch("s") - first.dt.epoch("s")
    per_node = (
        per_attempt.filter(seconds > 0)
        .group_by("attempt_id", "node").agg(first.min(), last.max(), seconds.sum(), total.sum())
        .with_columns(
            pl.when(seconds > 1).then((last - first) / (seconds - 1)).alias("_interval"),
            pl.when(span > 0).then((total / seconds - first.dt.epoch("s")) / span).alias("_center"),
        )
    )
    return per_node.group_by("attempt_id").agg(
        last.max().alias("last_progress"),
        pl.col("_interval").sort_by(seconds, "node").last().alias("progress_interval"),
        seconds.max().alias("progress_reports"),
        pl.col("_center").sort_by(seconds, "node").last().alias("progress_center"),
    )


def recent_results(
    lake: Lake, since: date, until: date, config: EngineConfig, clusters: list[str] | None
) -> pl.DataFrame:
    """Verdicts already in the lake for the ``repeat_window`` before the run's window (and
    in it, from earlier runs): only the columns the repeat-offender view reads."""
    first = since - timedelta(seconds=config.seconds("repeat_window"))
    return lake.scan("results", clusters=clusters, days=days_between(first, until)).select(HISTORY_COLUMNS).collect()


def failing_connectors(lake: Lake) -> pl.DataFrame:
    """Connectors whose latest ingest of a window failed, from the lake's ingest manifests:
    ``cluster``, ``connector``, ``error``, ``start``, ``end`` (read once per run)."""
    rows = [
        {"cluster": r["cluster"], "connector": r["connector"], "error": r["error"],
         "start": m["window"]["start"], "end": m["window"]["end"], "ingest_ts": m["ingest_ts"]}
        for m in lake.manifests() if m.get("kind") == "ingest" and m.get("window")
        for r in m["reports"]
    ]
    if not rows:
        return pl.DataFrame(schema={"cluster": pl.String, "connector": pl.String, "error": pl.String,
                                    "start": TS_DTYPE, "end": TS_DTYPE})
    return (
        pl.DataFrame(rows, schema={k: pl.String for k in rows[0]})
        .with_columns(pl.col("start", "end").str.to_datetime(time_unit="us", time_zone="UTC"))
        .sort("ingest_ts")
        .group_by("cluster", "connector", "start", "end", maintain_order=True).last()
        .filter(pl.col("error").is_not_null())
        .drop("ingest_ts")
    )


def connector_failures(
    lake: Lake, attempts: pl.DataFrame, config: EngineConfig, failing: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Coverage entries for connectors whose latest ingest of a window overlapping an
    attempt (on its cluster) failed: the attempt's evidence may be incomplete. ``failing``
    is :func:`failing_connectors` when already read."""
    latest = failing_connectors(lake) if failing is None else failing
    lookback = timedelta(seconds=config.seconds("lookback"))
    grace = timedelta(seconds=config.seconds("grace"))
    return (
        attempts.select("attempt_id", "cluster", "start_ts", "end_ts")
        .join(latest, on="cluster")
        .filter((pl.col("start") <= pl.col("end_ts") + grace) & (pl.col("end") > pl.col("start_ts") - lookback))
        .select(
            "attempt_id",
            pl.col("connector").alias("source"),
            pl.lit(0, dtype=pl.Int64).alias("rows"),
            pl.concat_str([pl.lit("connector failed: "), pl.col("error")]).alias("error"),
        )
        .sort("attempt_id", "source", "error")
        .unique(["attempt_id", "source"], keep="first", maintain_order=True)
    )


def state_events(attempts: pl.DataFrame, pack: RulePack) -> pl.DataFrame:
    """The scheduler record of each ended attempt as a ``context`` event for the evidence
    trail, labelled by the pack's ``state`` rule when one covers its state."""
    rows = attempts.join(state_table(pack.state).drop("action"), on="state", how="left")
    message = pl.concat_str(
        pl.lit("scheduler: job "), pl.col("job_id"),
        pl.lit(" ended "), pl.col("raw_state").fill_null(pl.col("state")),
        pl.lit(", exit code "), pl.col("exit_code").cast(pl.String).fill_null("-"),
        pl.lit(", signal "), pl.col("signal").cast(pl.String).fill_null("-"),
    )
    return rows.select(
        (pl.lit("scheduler@") + pl.col("attempt_id")).alias("event_id"),
        pl.col("end_ts").alias("ts"),
        pl.col("end_ts").alias("last_ts"),
        pl.lit(1, dtype=pl.Int64).alias("count"),
        pl.lit(None, dtype=pl.String).alias("node"),
        "attempt_id",
        pl.lit(None, dtype=pl.Int32).alias("rank"),
        pl.lit(None, dtype=pl.String).alias("gpu"),
        pl.lit(None, dtype=pl.String).alias("port"),
        pl.lit("scheduler").alias("source"),
        pl.col("rule_id").fill_null("scheduler.state"),
        pl.col("event").fill_null(pl.lit("attempt_") + pl.col("state")),
        pl.col("domain").fill_null("scheduler"),
        pl.col("cause").fill_null(pl.lit("scheduler.") + pl.col("state")),
        pl.lit("context").alias("role"),
        pl.lit("none").alias("action"),
        pl.lit("{}").alias("params"),
        message.alias("message"),
        pl.col("origin").fill_null(pl.col("attempt_id")),
        pl.lit("line").alias("ts_source"),
        "cluster",
    )


def attribute(
    attempts: pl.DataFrame,
    events: pl.DataFrame,
    coverage: pl.DataFrame,
    pack: RulePack,
    config: EngineConfig,
    history: pl.LazyFrame | None = None,
    topology: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Correlate and decide for already-extracted events: (verdicts, correlated events).

    This is the pure core of a run: no lake access, so tests and ``explain``-style one-off
    attribution call it directly.
    """
    correlated = correlate(attempts, events, pack, config, history, topology=topology)
    return decide(attempts, correlated, coverage, pack, config, events), correlated


def correlate(
    attempts: pl.DataFrame, events: pl.DataFrame, pack: RulePack, config: EngineConfig,
    history: pl.LazyFrame | None = None, launches: pl.DataFrame | None = None, topology: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The correlated events of ``attempts``: each event attached to the attempts it can
    explain (plus the scheduler's record of each), then re-labelled by the pack's suppress,
    precedence and python rules (``history``: past events, ``topology``: the lake's
    topology rows, for those); a confirmation whose
    preferred event ended up no root is a root candidate again, and a cascade whose root ended
    up none follows the suppress rules to the roots still standing. ``launches``: slurmd's
    launch lines if already split off ``events``, as for :func:`engine.correlate.attach_events`."""
    scheduler = state_events(attempts, pack).select(events.columns).cast(events.schema)
    correlated = attach_events(
        attempts, pl.concat([without_idle_addresses(events), scheduler]), pack, config, launches
    )
    skew = timedelta(seconds=config.seconds("clock_skew"))
    correlated = apply_suppress(correlated, pack.suppress, skew)
    correlated = apply_precedence(correlated, pack.precedence, skew)
    correlated = demote_recovered_outages(correlated, skew)
    correlated = demote_roots_after_the_hang(correlated)
    correlated = demote_outlived_roots(
        correlated, timedelta(seconds=config.seconds("fail_at_once")), skew, pack.passing()
    )
    context = RuleContext(attempts=attempts, history=history if history is not None else pl.LazyFrame(),
                          topology=topology if topology is not None else no_topology())
    correlated = restore_orphaned_confirmations(run_python_rules(correlated, pack.python, context))
    return relink_orphaned_cascades(correlated, pack.suppress, skew, [loaded.rule.id for loaded in pack.python])


def without_idle_addresses(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` without the benign address banners (the only benign events a run reads,
    see :func:`engine.extract.line_events`) of attempts with no root candidate about the
    network (the network domain's, or NCCL's invalid usage: a setting naming an interface
    or network a node may lack): only there does a rule read them, to map a peer's address
    back to its node (``rules/ib_peer.py``) or to see which nodes got through NCCL's setup
    (``rules/job_setup.py``)."""
    benign = pl.col("role") == "benign"
    about_network = (pl.col("domain") == "network") | (pl.col("cause") == "workload.nccl_invalid_usage")
    network = about_network & (pl.col("role") == "root_candidate") & pl.col("attempt_id").is_not_null()
    needed = events.select("attempt_id", "domain", "cause", "role").filter(network)["attempt_id"].unique()
    return events.filter(~benign | pl.col("attempt_id").is_in(needed.implode()))


def plan_chunks(attempts: pl.DataFrame, since: date, until: date, config: EngineConfig) -> list[tuple[date, date]]:
    """Consecutive end-day ranges that cover ``[since, until]``, each closed once it holds
    ``chunk_attempts`` attempts (a day is never split, so a chunk may hold more)."""
    per_day = dict(attempts.group_by(pl.col("end_ts").dt.date()).len().iter_rows())
    chunks: list[tuple[date, date]] = []
    first, held = since, 0
    for day in days_between(since, until):
        held += per_day.get(day, 0)
        if held >= config.chunk_attempts:
            chunks.append((first, day))
            first, held = day + timedelta(days=1), 0
    if first <= until:
        chunks.append((first, until))
    return chunks


SCRATCH = re.compile(r"\.run-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}-[a-z0-9_]{8}")
"""The name of a run's scratch folder in the lake: ``.<run_id>-`` (see :func:`run_attribution`)
and the eight random characters ``tempfile`` adds."""


def _remove_stale_scratch(lake: Lake) -> None:
    """Delete the scratch folders (:data:`SCRATCH`) killed runs left in the lake. A lake has
    one writer at a time, so none present when a run starts is a live run's."""
    for entry in sorted(lake.root.iterdir()):
        if SCRATCH.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)


READ_THREADS = 2
"""Observation days read at once: much of one day's scan runs on a single core, so two
days in flight keep both cores of a small machine busy."""

LOCATED_COLUMNS = ["cluster", "node", "gpu", "port", "attempt_id", "rank", "ts", "rule_id", "event", "role"]
"""Columns of the GPU- or port-located events a chunk passes on to the python rules of
later chunks (their ``history``)."""


@dataclass
class _DayEvents:
    """The observation days of a run: each read once (its events and coverage counts,
    :meth:`read`), its events written to ``events/`` at once and kept, slurmd's launch lines
    split off (:func:`engine.correlate.split_launch_lines`), only while a chunk still to
    come reads that day (:meth:`window`).

    :meth:`read` only reads the lake, so the next chunk's days can be read while the
    current chunk is attributed; :meth:`window` writes, on the run's own thread, so the
    events table changes in the same order whatever the timing.
    """

    lake: Lake
    pack: RulePack
    clusters: list[str] | None
    run_clusters: list[str]
    days: list[date]
    say: Progress
    cache: dict[date, tuple[pl.DataFrame, ...]] = field(default_factory=dict)
    next_day: int = 0
    observations: int = 0
    events: int = 0
    read_s: float = 0.0
    write_s: float = 0.0

    def _read_day(self, day: date) -> tuple[pl.DataFrame, tuple[pl.DataFrame, ...], int, tuple[pl.DataFrame, ...]]:
        """One day's events, the same with its launch lines split off, its line count and
        its coverage counts. Observations files without the pack's derivatives (landed with
        another pack or without them) get them first: later runs read those instead of the
        lines. Derivatives are a per-file cache written atomically, so writing them from the
        reading threads changes no result."""
        files = self.lake.files("observations", clusters=self.clusters, days=[day])
        for derivation in landing_derivations(self.pack):
            self.lake.derive_missing(derivation, files)
        events, n_obs = extract_day(self.lake, self.pack, day, self.clusters, files)
        return events, split_launch_lines(events), n_obs, coverage_counts(self.lake, files)

    def read(self, days: list[date]) -> list[tuple[date, tuple]]:
        """Read every run day not read yet up to the last of ``days`` (:data:`READ_THREADS`
        at a time), in day order."""
        todo = []
        while self.next_day < len(self.days) and self.days[self.next_day] <= days[-1]:
            todo.append(self.days[self.next_day])
            self.next_day += 1
        tick = time.perf_counter()
        with ThreadPoolExecutor(READ_THREADS) as pool:
            read = list(zip(todo, pool.map(self._read_day, todo), strict=True))
        self.read_s += time.perf_counter() - tick
        return read

    def window(
        self, read: list[tuple[date, tuple]], days: list[date], count_days: list[date], keep_from: date,
        past: _PastEvents,
    ) -> tuple[pl.DataFrame, ...]:
        """Write the events of the days just ``read`` (and hand them to ``past``), then
        return the events of ``days`` and their launch lines, and the node-hour and attempt
        counts of ``count_days``; days before ``keep_from`` are not kept."""
        tick = time.perf_counter()
        for day, (events, split, n_obs, counts) in read:
            self.observations += n_obs
            self.events += events.height
            self.say(f"extracted {events.height} events from {n_obs} lines of {day}")
            by_cluster = events.partition_by("cluster", as_dict=True)
            written = {c for (c,) in by_cluster} | set(self.run_clusters)
            for cluster in sorted(written):
                part = by_cluster.get((cluster,), events.head(0)).drop("cluster")
                self.lake.replace_partitions("events", part, cluster=cluster, days=[day])
            past.rewritten(day, events, written)
            if day >= keep_from:
                self.cache[day] = (*split, *counts)
        self.write_s += time.perf_counter() - tick
        for day in [d for d in self.cache if d < keep_from]:
            del self.cache[day]
        def concat(of: list[date], i: int) -> pl.DataFrame:
            return pl.concat([self.cache[d][i] for d in of if d in self.cache])

        return concat(days, 0), concat(days, 1), concat(count_days, 2), concat(count_days, 3)


@dataclass
class _PastEvents:
    """The rows of the events table whose event the pack's python rules read from history
    (:meth:`RulePack.history_events`), kept in memory for a run: read whole once, then
    given each day the run rewrites as it writes it. Each chunk's ``history`` is then what
    a scan of the whole table would give at that point (earlier runs' node lines placed,
    below), without scanning it once per chunk.

    A node's line in the events table is no attempt's: a run attaches it to the attempts
    whose window it falls in only in memory, and passes those of one chunk on to the next
    (``located``). Lines of the ``repeat_window`` before the run's first end day are
    placed here the same way, in every attempt of the lake's attempts table that ended then
    and whose window ``[start - lookback, end + grace]`` holds them (on the node's own
    clock), so that a rule counting jobs sees those of earlier runs too: also the lines of
    the days the run reads only for its attempts' lookback, whose earlier attempts the run
    does not attribute. Older lines, and lines in no attempt's window, stay no attempt's.
    """

    lake: Lake
    names: tuple[str, ...]
    first_day: date
    """The first day the run reads."""
    config: EngineConfig
    frame: pl.DataFrame | None = None
    since: date | None = None
    """The run's first end day (default :attr:`first_day`): the attempts that ended before
    it are earlier runs', and the lines in their windows are placed in them."""

    @property
    def _until(self) -> date:
        return self.since or self.first_day

    def _read(self) -> pl.DataFrame:
        scan = self.lake.scan("events")
        return (scan.filter(pl.col("event").is_in(self.names)) if self.names else scan.clear()).collect()

    def _placed(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` with each node line of the ``repeat_window`` before the run's first end
        day (:attr:`since`) copied into the earlier attempts whose window holds it."""
        first = self._until - timedelta(seconds=self.config.seconds("repeat_window"))
        earlier = (pl.col("day") >= first) & (pl.col("day") < self._until)
        loose = pl.col("attempt_id").is_null() & pl.col("node").is_not_null() & earlier
        if not rows.select(loose.any()).item():
            return rows
        lines = rows.filter(loose).with_row_index("_row")
        attempts = (
            self.lake.scan("attempts", days=days_between(first, self._until - timedelta(days=1)))
            .filter(pl.col("end_ts").is_not_null())
            .select("cluster", "attempt_id", "start_ts", "end_ts", "nodes")
            .collect()
        )
        windows = node_day_windows(
            attempts, timedelta(seconds=self.config.seconds("lookback")), timedelta(seconds=self.config.seconds("grace")),
            ["cluster", "attempt_id"],
        ).select("cluster", "node", "bucket", "attempt_id", "lo", "hi")
        placed = in_windows(lines.drop("attempt_id"), windows).sort("_row", "attempt_id").select(lines.columns)
        unplaced = lines.join(placed.select("_row"), on="_row", how="anti")
        return pl.concat([rows.filter(~loose), placed.drop("_row"), unplaced.drop("_row")])

    def rewritten(self, day: date, events: pl.DataFrame, clusters: set[str]) -> None:
        """Take in ``day`` as the run just rewrote it for ``clusters``, with ``events``
        (events columns plus ``cluster``: what it wrote, so the day is not read back). On a
        day of the run's attempts no line is placed, the run attaches them itself; on a day
        it reads only for their lookback, lines go to the earlier attempts (:meth:`_placed`)."""
        if self.frame is None or not self.names:
            return
        mine = events.filter(pl.col("event").is_in(self.names)).with_columns(pl.lit(day).alias("day"))
        if day < self._until:
            mine = self._placed(mine)
        # Copied out of the day's frame: filtered string columns still hold all its text,
        # and the few rows kept of each day would keep every day's in memory (0.7 GB at 1M).
        mine = pl.from_arrow(mine.to_arrow(compat_level=pl.CompatLevel.oldest()))
        kept = self.frame.filter((pl.col("day") != day) | ~pl.col("cluster").is_in(list(clusters)))
        self.frame = pl.concat([kept, mine.select(self.frame.columns).cast(self.frame.schema)])

    def history(self, located: pl.DataFrame) -> pl.LazyFrame:
        """The past events a python rule sees: the lake's and those ``located`` by the
        run's earlier chunks, of the declared events only."""
        if self.frame is None:
            self.frame = self._placed(self._read())
        earlier = located.filter(pl.col("event").is_in(self.names)) if located.width else located
        return pl.concat([self.frame.drop("day").lazy(), earlier.lazy()], how="diagonal_relaxed")


def _write_results(
    lake: Lake, chunks: list[tuple[date, date]], staged: list[pl.DataFrame | Path], notes: pl.DataFrame,
    stamp: list[pl.Expr], clusters: list[str],
) -> pl.DataFrame:
    """Write each chunk's verdicts (in memory or staged) with the fleet ``notes`` applied
    and the run's ``stamp`` columns, replacing the chunk's days of every cluster of the
    run; returns the verdict counts by domain and quality."""
    counts = []
    for (first, last), verdicts in zip(chunks, staged, strict=True):
        results = (
            apply_fleet_notes(verdicts if isinstance(verdicts, pl.DataFrame) else pl.read_parquet(verdicts), notes)
            .sort(["cluster", "end_ts", "attempt_id"], nulls_last=True)
            .with_columns(stamp)
            .select(RESULTS.names + ["cluster"])
        )
        for cluster in clusters:
            lake.replace_partitions(
                "results", results.filter(pl.col("cluster") == cluster).drop("cluster"),
                cluster=cluster, days=days_between(first, last),
            )
        counts.append(results.group_by("domain", "quality").len("attempts"))
    return (
        pl.concat(counts).group_by("domain", "quality").agg(pl.col("attempts").sum())
        .sort(["attempts", "domain", "quality"], descending=[True, False, False])
    )


def run_attribution(
    lake: Lake,
    since: date,
    until: date,
    *,
    pack: RulePack | None = None,
    config: EngineConfig | None = None,
    clusters: list[str] | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """Attribute every attempt that ended in ``[since, until]`` and write the results.

    Works on the window narrowed to the lake's attempts (:func:`run_window`). Replaces the
    ``results`` partitions of those days and the ``events`` partitions of the observation
    days read, then writes ``runs/<run_id>.json``. Deterministic: the same lake
    and pack give identical results except ``run_id``/``run_ts``. Attempts are attributed
    in chunks of end days (:func:`plan_chunks`; see the module docstring): a python rule
    sees, besides the lake's past events, the located events of the chunks before its own.
    """
    pack = pack or load_rule_pack()
    config = config or EngineConfig()
    say = progress or (lambda _msg: None)
    run_ts = datetime.now(UTC).replace(microsecond=0)
    run_id = f"run-{run_ts:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    # ``extract`` (reading the days) and ``correlate_decide`` overlap: ``attribute`` is the
    # time the run spent in the two, writes excluded.
    timings = dict.fromkeys(["scope", "extract", "correlate_decide", "attribute", "fleet", "write"], 0.0)

    tick = time.perf_counter()
    window = {"since": since.isoformat(), "until": until.isoformat()}
    since, until = run_window(lake, since, until, clusters)
    attempts = scope_attempts(lake, since, until, clusters)
    unended = unended_attempts(lake, since, until, clusters)
    run_clusters = sorted(attempts["cluster"].unique().to_list())
    chunks = plan_chunks(attempts, since, until, config)
    end_day = pl.col("end_ts").dt.date()
    scoped = [attempts.filter(end_day.is_between(first, last)) for first, last in chunks]
    del attempts
    windows = [observation_days(first, last, config, part) for (first, last), part in zip(chunks, scoped, strict=True)]
    # Coverage reads the row counts of a few more days around each window (coverage_days).
    count_windows = [coverage_days(first, last, config, part) for (first, last), part in zip(chunks, scoped, strict=True)]
    # A day can be dropped from memory once no chunk still to come starts its window before it.
    keep_from = [min(w[0] for w in count_windows[k:]) for k in range(len(count_windows))]
    # Every day from the first window's start to the last window's end is rewritten, even
    # one no chunk reads: the events table then matches the pack over the whole span.
    span = days_between(min(w[0] for w in count_windows), max(w[-1] for w in count_windows))
    day_events = _DayEvents(lake, pack, clusters, run_clusters, span, say)
    past = _PastEvents(lake, pack.history_events(), span[0], config, since=since)
    failing = failing_connectors(lake)
    topology = lake.scan("topology", clusters=clusters).collect()
    n_attempts = sum(p.height for p in scoped)
    timings["scope"] = time.perf_counter() - tick
    say(f"{n_attempts} attempts ended between {since} and {until}, in {len(chunks)} chunk(s)")

    lake.root.mkdir(parents=True, exist_ok=True)
    _remove_stale_scratch(lake)
    # Three helper threads keep both cores busy where one chunk's work is mostly
    # single-core Polars: one reads the next chunk's days ahead, one computes coverage while
    # the main thread correlates, one decides a chunk while the main thread correlates the
    # next (which needs only the chunk's correlated events, for its history). Only the main
    # thread writes tables; the reading threads write only the derivatives a day's files
    # lack (a cache, see ``_DayEvents._read_day``).
    with (tempfile.TemporaryDirectory(prefix=f".{run_id}-", dir=lake.root) as scratch,
          ThreadPoolExecutor(1) as ahead, ThreadPoolExecutor(1) as side, ThreadPoolExecutor(1) as decider):
        slim, located, staged = [], pl.DataFrame(), []
        started, staging_s = time.perf_counter(), 0.0

        def decided(part: pl.DataFrame, correlated: pl.DataFrame, coverage, events: pl.DataFrame):
            tick = time.perf_counter()
            return decide(part, correlated, coverage.result(), pack, config, events), time.perf_counter() - tick

        def stage(k: int, verdicts: pl.DataFrame) -> float:
            """Keep chunk ``k``'s verdicts for the results (staged in the scratch folder when
            there are several chunks): the seconds it took."""
            tick = time.perf_counter()
            slim.append(slim_view(verdicts))
            if len(scoped) == 1:  # one chunk: nothing to bound, keep its verdicts
                staged.append(verdicts)
            else:
                staged.append(Path(scratch) / f"chunk-{k}.parquet")
                verdicts.write_parquet(staged[-1], compression="lz4")
            say(f"attributed {scoped[k].height} attempts that ended {chunks[k][0]} to {chunks[k][1]}")
            return time.perf_counter() - tick

        pending = ahead.submit(day_events.read, count_windows[0])
        deciding = None
        for k, part in enumerate(scoped):
            read = pending.result()
            if k + 1 < len(scoped):
                pending = ahead.submit(day_events.read, count_windows[k + 1])
            events, launches, per_hour, per_attempt = day_events.window(
                read, windows[k], count_windows[k], keep_from[k], past)
            del read  # the days' whole frames: the cache keeps them split
            tick = time.perf_counter()
            failures = connector_failures(lake, part, config, failing)
            coverage = side.submit(coverage_from_counts, part, per_hour, per_attempt, failures, config)
            correlated = correlate(part, events, pack, config, history=past.history(located), launches=launches,
                                   topology=topology)
            del launches
            located = pl.concat([located, correlated.filter(
                pl.col("attempt_id").is_not_null() & (pl.col("gpu").is_not_null() | pl.col("port").is_not_null())
            ).select(LOCATED_COLUMNS)], how="diagonal_relaxed")
            timings["correlate_decide"] += time.perf_counter() - tick
            if deciding is not None:  # the previous chunk, decided meanwhile
                verdicts, decide_s = deciding.result()
                timings["correlate_decide"] += decide_s
                staging_s += stage(k - 1, verdicts)
            deciding = decider.submit(decided, part, correlated, coverage, events)
            del events, correlated
        verdicts, decide_s = deciding.result()
        timings["correlate_decide"] += decide_s
        staging_s += stage(len(scoped) - 1, verdicts)
        del verdicts
        timings["attribute"] = time.perf_counter() - started - day_events.write_s - staging_s
        timings["write"] += day_events.write_s + staging_s
        # Reading a day is extracting its events and counting its rows for coverage.
        timings["extract"] = day_events.read_s

        tick = time.perf_counter()
        notes = fleet_notes(pl.concat(slim), recent_results(lake, since, until, config, clusters), topology, config)
        slim.clear()  # the slim verdicts are done with (``stage`` holds the list itself)
        timings["fleet"] = time.perf_counter() - tick

        tick = time.perf_counter()
        stamp = [
            pl.lit(pack.version).alias("rule_pack_version"),
            pl.lit(run_id).alias("run_id"),
            pl.lit(run_ts).cast(pl.Datetime("us", "UTC")).alias("run_ts"),
        ]
        by_domain_quality = _write_results(lake, chunks, staged, notes, stamp, run_clusters)
        timings["write"] += time.perf_counter() - tick
    summary = RunSummary(run_id, since, until, n_attempts, day_events.observations, day_events.events,
                         by_domain_quality, lake, clusters, timings, unended)
    lake.write_manifest(run_id, {
        "kind": "run",
        "run_id": run_id,
        "run_ts": run_ts.isoformat(),
        "window": window,
        "clusters": clusters,
        "rule_pack": {"version": pack.version, "files": [str(f) for f in pack.files]},
        "config": config.model_dump(),
        "counts": {
            "attempts": n_attempts,
            "observations_read": day_events.observations,
            "events": day_events.events,
            "verdicts": int(by_domain_quality["attempts"].sum()),
            "skipped_without_end": unended,
        },
        "chunks": [{"since": a.isoformat(), "until": b.isoformat(), "attempts": p.height}
                   for (a, b), p in zip(chunks, scoped, strict=True)],
        "verdicts": by_domain_quality.to_dicts(),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    })
    return summary
