"""Prometheus ``query_range`` → ``metrics`` rows (DCGM GPU and node_exporter InfiniBand series).

Each configured PromQL query is evaluated over the window at ``step`` resolution through
``/api/v1/query_range``. Prometheus refuses a range with more than 11,000 points per series,
so long windows are fetched in consecutive chunks that never share a sample and are
concatenated into one batch per query (a batch is complete or not yielded at all).

Rows: ``node`` from the ``Hostname`` label (dcgm-exporter) or ``instance`` without its port;
``gpu`` from ``gpu``; ``hca``/``port`` from node_exporter's ``device``/``port`` on
``node_infiniband_*`` series; ``labels`` every label as sorted JSON; ``origin`` the URL of
the chunk's query. Metric names that changed across dcgm-exporter versions are mapped to
one name (:data:`METRIC_ALIASES`); the original ``__name__`` stays in ``labels``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import ClassVar, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ingest.connectors.base import (
    Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow, resolve_window,
)
from ingest.connectors.http import HttpClient
from ingest.schema import METRICS

DEFAULT_METRICS = (
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_EXP_XID_ERRORS_COUNT",
    "DCGM_EXP_XID_ERRORS_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_GPU_TEMP",
    "node_infiniband_link_downed_total",
    "node_infiniband_symbol_error_total",
    "node_infiniband_port_errors_received_total",
    "node_infiniband_state_id",
)
"""Series the default query selects: what :file:`rules/metrics.yaml` reads."""

DEFAULT_QUERY = '{__name__=~"' + "|".join(DEFAULT_METRICS) + '"}'

METRIC_ALIASES = {
    # dcgm-exporter's XID counter: ``_TOTAL`` in some releases, ``_COUNT`` in others.
    "DCGM_EXP_XID_ERRORS_TOTAL": "DCGM_EXP_XID_ERRORS_COUNT",
}
"""Exporter-version spellings → the one name rules use."""

MAX_POINTS = 11_000
"""Prometheus's limit on points per series in one ``query_range`` answer."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PORT_SUFFIX = r":\d+$"


class PromQuery(BaseModel):
    """One PromQL query; ``metric`` names results that carry no ``__name__`` (``rate()``…)."""

    model_config = ConfigDict(extra="forbid")

    query: str
    metric: str | None = None


class PrometheusOptions(ConnectorOptions):
    """Where Prometheus is, what to ask, and how."""

    url: str = Field(description="base URL, e.g. http://prometheus:9090")
    queries: list[PromQuery] = Field(default_factory=lambda: [PromQuery(query=DEFAULT_QUERY)])
    step: str = "30s"
    method: Literal["POST", "GET"] = "POST"
    token_env: str | None = None
    timeout: float = 30.0
    max_attempts: int = 5
    max_points: int = Field(MAX_POINTS, ge=2, le=MAX_POINTS)
    start: datetime | None = None
    end: datetime | None = None

    @field_validator("step")
    @classmethod
    def _step(cls, v: str) -> str:
        step_seconds(v)
        return v


def step_seconds(step: str) -> float:
    """Seconds in a Prometheus duration like ``15s``, ``1m`` (a bare number is seconds)."""
    try:
        return float(step)
    except ValueError:
        pass
    match = _DURATION.match(step.strip())
    if not match:
        raise ValueError(f"step '{step}' is not a duration — write e.g. 15s, 1m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def chunk_ranges(
    start: datetime, end: datetime, step_s: float, max_points: int = MAX_POINTS
) -> list[tuple[datetime, datetime]]:
    """Split ``[start, end)`` into inclusive ``query_range`` ranges of at most ``max_points``
    evaluation steps each; consecutive ranges are one step apart, so none repeats a sample."""
    step = timedelta(seconds=step_s)
    span = step * (max_points - 1)
    last = end - timedelta(milliseconds=1)
    out = []
    cursor = start
    while cursor <= last:
        chunk_end = min(cursor + span, last)
        out.append((cursor, chunk_end))
        cursor = cursor + span + step
    return out


def matrix_to_metrics(result: list[dict], origin: str, default_metric: str) -> pl.DataFrame:
    """A ``matrix`` result (``[{"metric": {...}, "values": [[ts, "v"], …]}, …]``) → rows
    with the ``metrics`` columns (``input_id`` left null for the caller)."""
    frames = []
    for series in result:  # one iteration per series; samples stay columnar
        labels = series.get("metric") or {}
        values = series.get("values") or []
        if not values:
            continue
        ts, vals = zip(*values)
        name = labels.get("__name__", default_metric)
        frames.append(pl.DataFrame({
            "t": pl.Series(ts, dtype=pl.Float64),
            "value": pl.Series(vals, dtype=pl.String).cast(pl.Float64),
        }).with_columns(
            metric=pl.lit(METRIC_ALIASES.get(name, name)),
            hostname=pl.lit(labels.get("Hostname"), dtype=pl.String),
            instance=pl.lit(labels.get("instance"), dtype=pl.String),
            gpu=pl.lit(labels.get("gpu"), dtype=pl.String),
            device=pl.lit(labels.get("device"), dtype=pl.String),
            port=pl.lit(labels.get("port"), dtype=pl.String),
            labels=pl.lit(json.dumps(labels, sort_keys=True, separators=(",", ":"))),
        ))
    if not frames:
        return pl.from_arrow(METRICS.empty_table())
    frame = pl.concat(frames)
    is_ib = pl.col("metric").str.starts_with("node_infiniband_")
    return frame.select(
        ts=(pl.col("t") * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
        node=pl.coalesce(
            pl.col("hostname"),
            pl.col("instance").str.replace(_PORT_SUFFIX, "").str.strip_chars("[]"),
        ),
        metric=pl.col("metric"),
        gpu=pl.col("gpu"),
        hca=pl.when(is_ib).then(pl.col("device")),
        port=pl.when(is_ib).then(pl.col("port")),
        value=pl.col("value"),
        labels=pl.col("labels"),
        origin=pl.lit(origin),
        input_id=pl.lit(None, dtype=pl.String),
    )


class PrometheusConnector(Connector):
    """Metric samples from Prometheus ``query_range``, one batch per query and window."""

    name: ClassVar[str] = "prometheus"
    Options: ClassVar[type[ConnectorOptions]] = PrometheusOptions
    options: PrometheusOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield one ``metrics`` batch per configured query over ``window`` (or the
        options' ``start``/``end`` when no window is given)."""
        opts = self.options
        start, end = resolve_window(window, opts.start, opts.end, f"prometheus {opts.url}")
        step_s = step_seconds(opts.step)
        client = HttpClient(
            opts.url, token_env=opts.token_env, timeout=opts.timeout, max_attempts=opts.max_attempts
        )
        for spec in opts.queries:
            input_id = client.url("/api/v1/query_range", {
                "query": spec.query, "start": _iso(start), "end": _iso(end), "step": opts.step,
            })
            parts = []
            for chunk_start, chunk_end in chunk_ranges(start, end, step_s, opts.max_points):
                params = {
                    "query": spec.query, "start": _iso(chunk_start), "end": _iso(chunk_end),
                    "step": opts.step,
                }
                answer = (client.post_form_json if opts.method == "POST" else client.get_json)(
                    "/api/v1/query_range", params
                )
                origin = client.url("/api/v1/query_range", params)
                parts.append(matrix_to_metrics(_matrix(answer, origin), origin, spec.metric or spec.query))
            rows = pl.concat(parts).with_columns(input_id=pl.lit(input_id))
            yield Batch(
                table="metrics", rows=rows, cluster=self.cluster, input_id=input_id,
                fetched=rows.height,
            )


def _matrix(answer: dict, origin: str) -> list[dict]:
    if answer.get("status") != "success":
        raise ConnectorError(
            f"{origin}: Prometheus answered {answer.get('errorType')}: {answer.get('error')} "
            "— fix the PromQL query"
        )
    data = answer.get("data") or {}
    if data.get("resultType") != "matrix":
        raise ConnectorError(
            f"{origin}: expected a matrix from query_range, got {data.get('resultType')!r} "
            "— is the URL a Prometheus-compatible API?"
        )
    return data.get("result") or []


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
