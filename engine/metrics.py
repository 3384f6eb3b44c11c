"""Metric rules: conditions over metric series → events, vectorized.

A series is one (cluster, node, metric, gpu, hca, port, labels). Each sample is compared with
the previous sample of its series (after sorting by series and time):

``increase``  the value rose by more than ``threshold`` (a counter that drops — a reset after a
              driver reload or reboot — is not an increase; growth after the reset is
              measured from the reset value)
``above``     the first sample of each run above ``threshold`` (the series' first sample counts);
              the event's ``last_ts`` and ``count`` are the run's last sample and its length
``below``     the first sample of each run below ``threshold``, likewise
``change``    the value differs from the previous sample (state gauges, link state)

The event's ``origin`` is the metric row's origin; ``params`` holds the metric, value and
previous value; ``port`` is ``<hca>:<port>`` when the sample names both.
"""

from __future__ import annotations

import polars as pl

from engine.extract import EVENT_SCHEMA, ORDER, dedupe_events, empty_events
from engine.rules.loader import RulePack
from engine.rules.model import MetricRule

SERIES_KEYS = ["cluster", "node", "metric", "gpu", "hca", "port", "labels"]
"""Columns identifying one metric series."""

_INPUT_COLUMNS = {
    "ts": EVENT_SCHEMA["ts"], "node": pl.String, "metric": pl.String, "gpu": pl.String,
    "hca": pl.String, "port": pl.String, "value": pl.Float64, "labels": pl.String,
    "origin": pl.String, "cluster": pl.String,
}


def _holds(rule: MetricRule, column: str = "value") -> pl.Expr | None:
    """Whether ``column`` is in the state an ``above``/``below`` rule reports (None for the
    rules that fire on one sample)."""
    if rule.condition == "above":
        return pl.col(column) > pl.lit(rule.threshold)
    if rule.condition == "below":
        return pl.col(column) < pl.lit(rule.threshold)
    return None


def _fires(rule: MetricRule) -> pl.Expr:
    value, previous = pl.col("value"), pl.col("_previous")
    if rule.condition == "increase":
        return previous.is_not_null() & (value - previous > pl.lit(rule.threshold))
    holds = _holds(rule)
    if holds is not None:
        # The first sample of a run in the state: the previous one was not (or there is none).
        return holds & (previous.is_null() | ~_holds(rule, "_previous"))
    return previous.is_not_null() & (value != previous)


def _fired(slim: pl.LazyFrame, rule: MetricRule) -> pl.LazyFrame:
    """The samples ``rule`` fires on (series, time, previous value) with ``_until`` and
    ``_n``: for a state rule, the last sample and the length of the run the firing sample
    starts (how long a GPU stayed hot), null otherwise."""
    mine = slim.filter(pl.col("metric").is_in(rule.metrics)).with_columns(_fires(rule).fill_null(False).alias("_fires"))
    holds = _holds(rule)
    if holds is None:
        return mine.filter("_fires").select(
            "_series", "ts", "_previous", pl.lit(None, pl.Datetime("us", "UTC")).alias("_until"),
            pl.lit(None, pl.Int64).alias("_n"))
    run = ["_series", "_run"]
    return (
        mine.with_columns(holds.fill_null(False).alias("_holds"), pl.col("_fires").cum_sum().over("_series").alias("_run"))
        .with_columns(pl.col("ts").filter(pl.col("_holds")).max().over(run).alias("_until"),
                      pl.col("_holds").sum().over(run).cast(pl.Int64).alias("_n"))
        .filter("_fires")
        .select("_series", "ts", "_previous", pl.col("_until").cast(pl.Datetime("us", "UTC")), "_n")
    )


def _rule_events(samples: pl.LazyFrame, rule: MetricRule) -> pl.LazyFrame:
    """The events of ``rule`` from the samples it fired on (with their ``_previous`` value)."""
    port = (
        pl.when(pl.col("hca").is_not_null() & pl.col("port").is_not_null())
        .then(pl.concat_str([pl.col("hca"), pl.lit(":"), pl.col("port")]))
        .otherwise(pl.coalesce(pl.col("port"), pl.col("hca")))
    )
    return (
        samples.select(
            # concat_str, not pl.format: Polars 2.1 panics formatting filtered multi-chunk input.
            pl.concat_str([pl.lit(f"{rule.id}@"), pl.col("origin")]).alias("event_id"),
            pl.col("ts"),
            pl.coalesce("_until", "ts").alias("last_ts"),
            pl.coalesce("_n", pl.lit(1, pl.Int64)).alias("count"),
            pl.col("node"),
            pl.lit(None, pl.String).alias("attempt_id"),
            pl.lit(None, pl.Int32).alias("rank"),
            pl.col("gpu"),
            port.alias("port"),
            pl.lit("metrics").alias("source"),
            pl.lit(rule.id).alias("rule_id"),
            pl.lit(rule.event).alias("event"),
            pl.lit(rule.domain).alias("domain"),
            pl.lit(rule.cause).alias("cause"),
            pl.lit(rule.role).alias("role"),
            pl.lit(rule.action).alias("action"),
            pl.struct("metric", "value", pl.col("_previous").alias("previous"), "labels")
            .struct.json_encode().alias("params"),
            pl.concat_str([
                pl.col("metric"), pl.lit(" = "), pl.col("value").cast(pl.String),
                pl.lit(" (previous "), pl.col("_previous").cast(pl.String).fill_null("none"), pl.lit(")"),
            ]).alias("message"),
            pl.col("origin"),
            pl.lit("line").alias("ts_source"),
            pl.col("cluster"),
        )
    )


def metric_events(
    metrics: pl.LazyFrame | pl.DataFrame, pack: RulePack, *, dedupe: bool = True
) -> pl.DataFrame:
    """Events of the pack's metric rules over metric samples.

    ``metrics`` has the metrics table's columns plus ``cluster`` (and ``day``). Returns
    events with the extractor's columns and order; with ``dedupe`` (the default) repeats
    within each rule's ``dedupe_window`` are folded as for log events.

    A day of a fleet's samples is millions of rows whose labels and origins are long
    strings: the conditions are evaluated over a slim frame (series hash, time, metric,
    value), streamed from the scan, and only the samples that fire are read again whole.
    """
    if not pack.metric:
        return empty_events()
    lf = metrics.lazy()
    present = lf.collect_schema().names()
    wanted = sorted({name for rule in pack.metric for name in rule.metrics})
    samples = (
        lf.select(
            pl.col(name).cast(dtype) if name in present else pl.lit(None, dtype).alias(name)
            for name, dtype in _INPUT_COLUMNS.items()
        )
        .filter(pl.col("metric").is_in(wanted))
        .with_columns(pl.struct(SERIES_KEYS).hash(seed=0).alias("_series"))
    )
    # A sample is found again by its series and time, whatever order a scan returns rows in.
    slim = (
        samples.select("_series", "ts", "metric", "value").collect(engine="streaming")
        .sort(["_series", "ts", "value"])
    )
    same_series = pl.col("_series") == pl.col("_series").shift(1)
    slim = slim.with_columns(pl.when(same_series).then(pl.col("value").shift(1)).alias("_previous"))
    fired = pl.concat([
        _fired(slim.lazy(), rule).with_columns(pl.lit(k, pl.UInt32).alias("_rule"))
        for k, rule in enumerate(pack.metric)
    ]).collect()
    if fired.is_empty():
        return empty_events()
    keys = ["_series", "ts"]
    rows = samples.join(fired.select(keys).unique().lazy(), on=keys, how="semi").collect(engine="streaming")
    whole = fired.join(rows, on=keys)
    events = (
        pl.concat([_rule_events(whole.lazy().filter(pl.col("_rule") == k), rule) for k, rule in enumerate(pack.metric)],
                  how="vertical")
        .cast(dict(EVENT_SCHEMA))
        .sort(ORDER, nulls_last=True, maintain_order=True)
        .collect()
    )
    return dedupe_events(events, pack) if dedupe else events
