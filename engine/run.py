"""The run orchestrator: scope → collect → extract → correlate → decide → fleet → write.

One call of :func:`run_attribution` attributes every attempt that ended in a window of UTC
days, replaces those days' verdicts in ``results/`` (a rerun never appends), rewrites the
derived ``events/`` partitions it extracted, and writes a run manifest. Observations are
read one day partition at a time; the events and verdicts of the whole window are held in
memory (see the README's benchmark for what that costs at a million attempts).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import polars as pl

from engine.config import EngineConfig
from engine.correlate import apply_precedence, apply_suppress, attach_events, demote_recovered_links
from engine.decide import decide, state_table
from engine.extract import extract_events
from engine.fleet import fleet_stage
from engine.metrics import metric_events
from engine.rules.loader import RulePack, load_rule_pack
from engine.rules.python_rules import RuleContext, run_python_rules
from ingest.lake import Lake, days_between
from ingest.schema import EVENTS, RESULTS

Progress = Callable[[str], None]


@dataclass
class RunSummary:
    """What a run did: its id, window, counts and per-stage timings (seconds)."""

    run_id: str
    since: date
    until: date
    attempts: int
    observations: int
    events: int
    verdicts: pl.DataFrame
    timings: dict[str, float] = field(default_factory=dict)

    def by_domain_quality(self) -> pl.DataFrame:
        """Verdict counts by domain and quality (the CLI's summary table)."""
        return (
            self.verdicts.group_by("domain", "quality").len("attempts")
            .sort(["attempts", "domain", "quality"], descending=[True, False, False])
        )


def scope_attempts(
    lake: Lake, since: date, until: date, clusters: list[str] | None = None
) -> pl.DataFrame:
    """Attempts that ended on a day in ``[since, until]`` (attempts are partitioned by end
    day, so this reads exactly those partitions)."""
    return (
        lake.scan("attempts", clusters=clusters, days=days_between(since, until))
        .filter(pl.col("end_ts").is_not_null() & (pl.col("state") != "running"))
        .drop("day")
        .collect()
        .sort(["cluster", "attempt_id"])
    )


def observation_days(
    since: date, until: date, config: EngineConfig, attempts: pl.DataFrame | None = None
) -> list[date]:
    """The observation day partitions a window needs: from the earliest start of its
    attempts (a job may have run for days before it ended in the window) minus the
    lookback, to the end of the window plus the grace."""
    lookback = timedelta(seconds=config.seconds("lookback"))
    first = datetime.combine(since, datetime.min.time(), tzinfo=UTC) - lookback
    if attempts is not None and attempts["start_ts"].drop_nulls().len():
        first = min(first, attempts["start_ts"].min() - lookback)
    last = datetime.combine(until, datetime.max.time(), tzinfo=UTC) + timedelta(seconds=config.seconds("grace"))
    return days_between(first.date(), last.date())


def extract_day(lake: Lake, pack: RulePack, day: date, clusters: list[str] | None) -> tuple[pl.DataFrame, int]:
    """Events of one observation day (log lines and metric samples), deduplicated."""
    observations = lake.scan("observations", clusters=clusters, days=[day])
    n_obs = observations.select(pl.len()).collect().item()
    events = extract_events(observations, pack, keep_benign=False)
    metrics = lake.scan("metrics", clusters=clusters, days=[day])
    from_metrics = metric_events(metrics, pack)
    columns = EVENTS.names + ["cluster"]
    return pl.concat([events.select(columns), from_metrics.select(columns)]), n_obs


def compute_coverage(
    lake: Lake, attempts: pl.DataFrame, days: list[date], config: EngineConfig,
    clusters: list[str] | None = None,
) -> pl.DataFrame:
    """Per attempt: rows each source contributed to its nodes and window, and which
    expected sources are missing (node logs for each node; the attempt's own output).

    Counts are pre-aggregated per (cluster, node, source, hour) in one pass and summed
    cumulatively, so a window's count is two as-of lookups (the running total at its end
    minus the one before its start): the cost follows the attempts' node count, not their
    duration or how many attempts a node ran.
    """
    lookback = timedelta(seconds=config.seconds("lookback"))
    grace = timedelta(seconds=config.seconds("grace"))
    obs = lake.scan("observations", clusters=clusters, days=days)
    per_hour = (
        obs.filter(pl.col("attempt_id").is_null())
        .group_by("cluster", "node", "source", pl.col("ts").dt.truncate("1h").alias("hour"))
        .len("rows").collect()
        .sort("cluster", "node", "source", "hour")
        .with_columns(pl.col("rows").cum_sum().over("cluster", "node", "source").alias("running"))
    )
    per_attempt = obs.filter(pl.col("attempt_id").is_not_null()).group_by(
        "cluster", "attempt_id", "source", "node"
    ).len("rows").collect()
    windows = attempts.select(
        "cluster", "attempt_id", pl.col("nodes").alias("node"),
        (pl.col("start_ts") - lookback).dt.truncate("1h").alias("lo"),
        (pl.col("end_ts") + grace).alias("hi"),
    ).explode("node").drop_nulls("node")
    running = per_hour.select("cluster", "node", "source", "hour", "running")
    node_rows = (
        windows.join(per_hour.select("cluster", "node", "source").unique(), on=["cluster", "node"])
        .sort("hi")
        .join_asof(running.sort("hour").rename({"running": "_to"}), left_on="hi", right_on="hour",
                   by=["cluster", "node", "source"], strategy="backward", check_sortedness=False)
        .drop("hour")
        .with_columns((pl.col("lo") - timedelta(microseconds=1)).alias("_before"))
        .sort("_before")
        .join_asof(running.sort("hour").rename({"running": "_from"}), left_on="_before", right_on="hour",
                   by=["cluster", "node", "source"], strategy="backward", check_sortedness=False)
        .with_columns((pl.col("_to").fill_null(0) - pl.col("_from").fill_null(0)).alias("rows"))
        .filter(pl.col("rows") > 0)
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
        missing_nodes, missing_app, connector_failures(lake, attempts, config),
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
    )


def recent_results(
    lake: Lake, since: date, until: date, config: EngineConfig, clusters: list[str] | None
) -> pl.DataFrame:
    """Verdicts already in the lake for the ``repeat_window`` before the run's window."""
    first = since - timedelta(seconds=config.seconds("repeat_window"))
    return lake.scan("results", clusters=clusters, days=days_between(first, until)).drop("day").collect()


def connector_failures(lake: Lake, attempts: pl.DataFrame, config: EngineConfig) -> pl.DataFrame:
    """Coverage entries for connectors whose latest ingest of a window overlapping an
    attempt (on its cluster) failed: the attempt's evidence may be incomplete."""
    rows = [
        {"cluster": r["cluster"], "connector": r["connector"], "error": r["error"],
         "start": m["window"]["start"], "end": m["window"]["end"], "ingest_ts": m["ingest_ts"]}
        for m in lake.manifests() if m.get("kind") == "ingest" and m.get("window")
        for r in m["reports"]
    ]
    schema = {"attempt_id": pl.String, "source": pl.String, "rows": pl.Int64, "error": pl.String}
    if not rows:
        return pl.DataFrame(schema=schema)
    latest = (
        pl.DataFrame(rows, schema={k: pl.String for k in rows[0]})
        .with_columns(pl.col("start", "end").str.to_datetime(time_unit="us", time_zone="UTC"))
        .sort("ingest_ts")
        .group_by("cluster", "connector", "start", "end", maintain_order=True).last()
        .filter(pl.col("error").is_not_null())
    )
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
        .cast(schema)
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
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Correlate and decide for already-extracted events: (verdicts, correlated events).

    This is the pure core of a run: no lake access, so tests and ``explain``-style one-off
    attribution call it directly.
    """
    correlated = attach_events(attempts, events, config)
    correlated = pl.concat([
        correlated,
        attach_events(attempts, state_events(attempts, pack), config),
    ]).sort(["attempt_id", "ts", "node", "origin", "rule_id"], nulls_last=True)
    correlated = apply_suppress(correlated, pack.suppress)
    correlated = apply_precedence(correlated, pack.precedence)
    correlated = demote_recovered_links(correlated)
    context = RuleContext(attempts=attempts, history=history if history is not None else pl.LazyFrame())
    correlated = run_python_rules(correlated, pack.python, context)
    verdicts = decide(attempts, correlated, coverage, pack.state, config)
    return verdicts, correlated


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

    Replaces the ``results`` partitions of those days and the ``events`` partitions of the
    observation days read, then writes ``runs/<run_id>.json``. Deterministic: the same lake
    and pack give identical results except ``run_id``/``run_ts``.
    """
    pack = pack or load_rule_pack()
    config = config or EngineConfig()
    say = progress or (lambda _msg: None)
    run_ts = datetime.now(UTC).replace(microsecond=0)
    run_id = f"run-{run_ts:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    timings: dict[str, float] = {}

    tick = time.perf_counter()
    attempts = scope_attempts(lake, since, until, clusters)
    timings["scope"] = time.perf_counter() - tick
    say(f"{attempts.height} attempts ended between {since} and {until}")

    tick = time.perf_counter()
    days = observation_days(since, until, config, attempts)
    per_day, n_obs = [], 0
    for day in days:
        events, n = extract_day(lake, pack, day, clusters)
        n_obs += n
        per_day.append((day, events))
        say(f"extracted {events.height} events from {n} lines of {day}")
    events = pl.concat([e for _, e in per_day])
    timings["extract"] = time.perf_counter() - tick

    tick = time.perf_counter()
    coverage = compute_coverage(lake, attempts, days, config, clusters)
    verdicts, _ = attribute(attempts, events, coverage, pack, config, history=lake.scan("events"))
    timings["correlate_decide"] = time.perf_counter() - tick

    tick = time.perf_counter()
    verdicts = fleet_stage(verdicts, recent_results(lake, since, until, config, clusters),
                           lake.scan("topology", clusters=clusters).collect(), config)
    timings["fleet"] = time.perf_counter() - tick

    tick = time.perf_counter()
    events_by_cluster = events.partition_by("cluster", as_dict=True)
    for cluster in sorted(set(events["cluster"].unique().to_list()) | set(attempts["cluster"].unique().to_list())):
        lake.replace_partitions(
            "events", events_by_cluster.get((cluster,), events.head(0)).drop("cluster"), cluster=cluster, days=days
        )
    results = verdicts.with_columns(
        pl.lit(pack.version).alias("rule_pack_version"),
        pl.lit(run_id).alias("run_id"),
        pl.lit(run_ts).cast(pl.Datetime("us", "UTC")).alias("run_ts"),
    ).select(RESULTS.names + ["cluster"])
    for cluster in sorted(results["cluster"].unique().to_list()):
        lake.replace_partitions(
            "results", results.filter(pl.col("cluster") == cluster).drop("cluster"),
            cluster=cluster, days=days_between(since, until),
        )
    timings["write"] = time.perf_counter() - tick

    summary = RunSummary(run_id, since, until, attempts.height, n_obs, events.height, results, timings)
    lake.write_manifest(run_id, {
        "kind": "run",
        "run_id": run_id,
        "run_ts": run_ts.isoformat(),
        "window": {"since": since.isoformat(), "until": until.isoformat()},
        "clusters": clusters,
        "rule_pack": {"version": pack.version, "files": [str(f) for f in pack.files]},
        "config": config.model_dump(),
        "counts": {
            "attempts": attempts.height,
            "observations_read": n_obs,
            "events": events.height,
            "verdicts": results.height,
        },
        "verdicts": summary.by_domain_quality().to_dicts(),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    })
    return summary
