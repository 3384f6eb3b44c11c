"""Coverage: a connector that failed for an attempt's window is reported, and lowers quality."""

from __future__ import annotations

import polars as pl

from engine.config import EngineConfig
from engine.run import connector_failures, coverage_from_counts
from ingest.files.common import TS_DTYPE
from ingest.connectors import ConnectorReport, record_ingest
from ingest.connectors.base import FetchWindow
from ingest.lake import Lake
from tests.engine_frames import at, attempts


def without_progress(per_attempt: pl.DataFrame) -> pl.DataFrame:
    """Per-attempt counts whose attempts printed no progress report (the columns
    :func:`engine.run.coverage_counts` gives them)."""
    return per_attempt.with_columns(
        pl.lit(None, TS_DTYPE).alias("progress_first"), pl.lit(None, TS_DTYPE).alias("progress_last"),
        pl.lit(0, pl.UInt32).alias("progress_seconds"), pl.lit(0, pl.Int64).alias("progress_sum_s"))


def test_failed_connector_is_in_the_coverage_until_a_later_ingest_succeeds(tmp_path):
    lake = Lake(tmp_path)
    att = attempts({"attempt_id": "a", "start_ts": at(0), "end_ts": at(60)},
                   {"attempt_id": "far", "start_ts": at(60 * 30), "end_ts": at(60 * 31)})
    window = FetchWindow(start=at(-60), end=at(120))
    record_ingest(lake, window, [ConnectorReport(connector="prometheus", cluster="c", error="HTTP 503 after 5 tries")])
    gaps = connector_failures(lake, att, EngineConfig())
    assert gaps.to_dicts() == [{"attempt_id": "a", "source": "prometheus", "rows": 0,
                                "error": "connector failed: HTTP 503 after 5 tries"}]
    record_ingest(lake, window, [ConnectorReport(connector="prometheus", cluster="c")])
    assert connector_failures(lake, att, EngineConfig()).is_empty()


def test_other_clusters_failures_do_not_count(tmp_path):
    lake = Lake(tmp_path)
    record_ingest(lake, FetchWindow(start=at(-60), end=at(120)),
                  [ConnectorReport(connector="loki", cluster="elsewhere", error="down")])
    assert connector_failures(lake, attempts({"attempt_id": "a"}), EngineConfig()).is_empty()


def _node_log_errors(hours: list[int], config: EngineConfig | None = None) -> list[str]:
    """The node-log coverage errors of a one-node attempt running from 10:00 to 11:00 when
    its node's syslog has one row in each of ``hours`` (offsets from 10:00, in hours)."""
    per_hour = pl.DataFrame({
        "cluster": "c", "node": "n1", "source": "syslog", "hour": [at(60 * h) for h in hours], "rows": 1,
    }, schema_overrides={"rows": pl.UInt32})
    per_attempt = without_progress(pl.DataFrame(
        {"cluster": ["c"], "attempt_id": ["a"], "source": ["app"], "node": ["n1"], "rows": [5]},
        schema_overrides={"rows": pl.UInt32}))
    failures = connector_failures(Lake("/nonexistent"), attempts(), EngineConfig()).clear()
    coverage = coverage_from_counts(attempts({"attempt_id": "a"}), per_hour, per_attempt, failures,
                                    config or EngineConfig())
    return [e["error"] for e in coverage["coverage"][0] if e["error"]]


def test_a_node_log_with_rows_before_and_after_a_quiet_attempt_covers_it():
    # Lines at 08:00 and 14:00, none from 10:00 (the start) to 11:10 (grace): the daemon was
    # writing all along, and the node had nothing to say during the job.
    assert _node_log_errors([-2, 4]) == []


def test_a_node_log_that_stops_before_the_attempt_ends_is_missing():
    # Nothing after 08:00: the node may have died or its later log was never landed.
    missing = [f"no {'/'.join(EngineConfig().node_log_sources)} rows for n1"]
    assert _node_log_errors([-2]) == missing
    assert _node_log_errors([4]) == missing
    assert _node_log_errors([0]) == []
    # Its last line in the hour before the start (within the 30 min lookback whose events
    # the attempt reads): it still stopped before the attempt ran.
    assert _node_log_errors([-1]) == missing


def test_a_node_log_quiet_for_longer_than_the_horizon_is_missing():
    # Rows only beyond quiet_horizon (12 h) on one side: nothing says the log was being
    # written around the attempt.
    missing = [f"no {'/'.join(EngineConfig().node_log_sources)} rows for n1"]
    assert _node_log_errors([-14, 4]) == missing
    assert _node_log_errors([-2, 24]) == missing
    assert _node_log_errors([-14, 4], EngineConfig(quiet_horizon="1d")) == []


def test_counts_split_over_several_rows_give_the_coverage_of_their_sums():
    # A rotated log and its successor landing in the same hour, and an attempt's output
    # spread over two days, give one count row per file and day: coverage must read them
    # as their sums, whatever order they come in.
    merged = pl.DataFrame({
        "cluster": "c", "node": ["n1"] * 3 + ["n2"] * 3, "source": "syslog",
        "hour": [at(60 * h) for h in (-2, 0, 4, -14, 1, 24)], "rows": [3, 5, 2, 1, 4, 6],
    }, schema_overrides={"rows": pl.UInt32})
    split = pl.concat([merged, merged.with_columns(pl.lit(1, pl.UInt32).alias("rows"))]).sample(
        fraction=1.0, shuffle=True, seed=7
    )
    app = without_progress(pl.DataFrame(
        {"cluster": "c", "attempt_id": ["a", "b"], "source": "app", "node": "n1", "rows": [5, 7]},
        schema_overrides={"rows": pl.UInt32}))
    split_app = pl.concat([app, app.with_columns(pl.lit(2, pl.UInt32).alias("rows"))]).reverse()
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]},
                   {"attempt_id": "b", "nodes": ["n2"], "start_ts": at(60 * 3), "end_ts": at(60 * 5)})
    failures = connector_failures(Lake("/nonexistent"), att, EngineConfig()).clear()

    def coverage(per_hour: pl.DataFrame, per_attempt: pl.DataFrame) -> list[dict]:
        return coverage_from_counts(att, per_hour, per_attempt, failures, EngineConfig()).sort("attempt_id").to_dicts()

    summed = merged.with_columns(pl.col("rows") + 1)
    assert coverage(split, split_app) == coverage(summed, app.with_columns(pl.col("rows") + 2))
