"""Builders of small attempts/events frames for engine unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from ingest.schema import ATTEMPTS, EVENTS

T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    """A timestamp ``minutes`` after T0."""
    return T0 + timedelta(minutes=minutes)


def attempts(*rows: dict) -> pl.DataFrame:
    """Attempts frame (+ cluster) with defaults for every column a test does not set."""
    base = {
        "attempt_id": None, "scheduler": "static", "job_id": "1", "job_name": None, "user": "u",
        "partition": None, "attempt_index": 0, "submit_ts": at(0), "start_ts": at(0), "end_ts": at(60),
        "raw_state": "FAILED", "state": "failed", "exit_code": 1, "signal": 0, "nodes": ["n1"],
        "n_nodes": 1, "ranks_per_node": 8, "gpus_per_node": 8, "origin": "ctx:1", "cluster": "c",
    }
    schema = pl.from_arrow(ATTEMPTS.empty_table()).schema | {"cluster": pl.String}
    return pl.DataFrame([base | r for r in rows], schema=schema)


def events(*rows: dict) -> pl.DataFrame:
    """Events frame (+ cluster); ``event_id`` defaults to a unique id per row."""
    base = {
        "ts": at(0), "last_ts": None, "count": 1, "node": "n1", "attempt_id": None, "rank": None,
        "gpu": None, "port": None, "source": "syslog", "rule_id": "r", "event": "e", "domain": "gpu",
        "cause": "gpu.x", "role": "root_candidate", "action": "none", "params": "{}", "message": "m",
        "origin": None, "ts_source": "line", "cluster": "c",
    }
    schema = pl.from_arrow(EVENTS.empty_table()).schema | {"cluster": pl.String}
    filled = []
    for i, r in enumerate(rows):
        row = base | r
        row["origin"] = row["origin"] or f"{row['node']}.log:{i}"
        row["event_id"] = row.get("event_id") or f"{row['rule_id']}@{row['origin']}"
        row["last_ts"] = row["last_ts"] or row["ts"]
        filled.append(row)
    return pl.DataFrame(filled, schema=schema)
