"""Loki ``query_range`` → ``observations`` (source partition ``loki``).

The LogQL selector is built from the window's nodes: ``{cluster="c", host=~"n1|n2"}`` with a
configurable node label, extra equality matchers and an optional literal line filter
(``|= "NVRM"``). Loki answers at most ``limit`` entries per request (the server caps it, 5000
by default), ``start`` inclusive, ``end`` exclusive, nanosecond timestamps; with
``direction=forward`` the connector pages: the next request starts at the last entry's
nanosecond, and the entries at exactly that nanosecond which were already returned are
dropped. Entries sharing a nanosecond across a page boundary are therefore neither lost nor
duplicated. The whole window is one batch: a window that cannot be read completely raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import ClassVar

import polars as pl
from pydantic import Field

from ingest.connectors.base import (
    Batch, Connector, ConnectorError, ConnectorOptions, FetchWindow, resolve_window,
)
from ingest.connectors.http import HttpClient

PATH = "/loki/api/v1/query_range"
_ENTRY_KEY = ["stream", "ns", "line"]
_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")
"""Characters RE2 reads as syntax; escaped so a host name matches only itself."""


class LokiOptions(ConnectorOptions):
    """Where Loki is and how to select the streams of the window's nodes."""

    url: str = Field(description="base URL, e.g. http://loki:3100")
    node_label: str = "host"
    cluster_label: str | None = "cluster"
    cluster_value: str | None = Field(None, description="defaults to the connector's cluster")
    matchers: dict[str, str] = Field(default_factory=dict, description="extra label=value matchers")
    line_filter: str | None = Field(None, description='literal text lines must contain (|= "…")')
    program_label: str | None = Field(None, description="stream label to use as program")
    nodes: list[str] = Field(default_factory=list, description="used when the window names none")
    limit: int = Field(5000, ge=1, description="entries per request; at most the server cap")
    org_id: str | None = Field(None, description="X-Scope-OrgID for multi-tenant Loki")
    token_env: str | None = None
    timeout: float = 30.0
    max_attempts: int = 5
    max_pages: int = Field(100_000, ge=1)
    start: datetime | None = None
    end: datetime | None = None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_logql(options: LokiOptions, cluster: str, nodes: list[str]) -> str:
    """The LogQL query for ``nodes`` (all streams of the cluster when empty)."""
    matchers = []
    if options.cluster_label:
        matchers.append(f"{options.cluster_label}={_quote(options.cluster_value or cluster)}")
    matchers += [f"{k}={_quote(v)}" for k, v in sorted(options.matchers.items())]
    if nodes:
        alternatives = "|".join(_REGEX_META.sub(r"\\\1", n) for n in sorted(set(nodes)))
        matchers.append(f"{options.node_label}=~{_quote(alternatives)}")
    if not matchers:
        raise ConnectorError(
            "loki: a query needs at least one label matcher — set cluster_label, matchers or nodes"
        )
    query = "{" + ", ".join(matchers) + "}"
    if options.line_filter:
        query += f" |= {_quote(options.line_filter)}"
    return query


def streams_to_entries(
    result: list[dict], node_label: str, program_label: str | None = None
) -> pl.DataFrame:
    """A ``streams`` result → one row per entry: ``stream`` (the labels as ``{k="v", …}``),
    ``node``/``program`` (from the named stream labels), ``ns``, ``line``."""
    frames = []
    for stream in result:  # one iteration per stream; entries stay columnar
        labels = stream.get("stream") or {}
        values = stream.get("values") or []
        if not values:
            continue
        # An entry may carry structured metadata as a third element; ns and line come first.
        columns = list(zip(*values))
        text = "{" + ", ".join(f"{k}={_quote(v)}" for k, v in sorted(labels.items())) + "}"
        frames.append(pl.DataFrame({
            "ns": pl.Series(columns[0], dtype=pl.String).cast(pl.Int64),
            "line": pl.Series(columns[1], dtype=pl.String),
        }).with_columns(
            stream=pl.lit(text),
            node=pl.lit(labels.get(node_label), dtype=pl.String),
            program=pl.lit(labels.get(program_label) if program_label else None, dtype=pl.String),
        ))
    if not frames:
        return pl.DataFrame(schema=_ENTRY_SCHEMA)
    return pl.concat(frames).select(list(_ENTRY_SCHEMA))


class LokiConnector(Connector):
    """Log lines from Loki ``query_range`` for the window's nodes, paged without loss."""

    name: ClassVar[str] = "loki"
    Options: ClassVar[type[ConnectorOptions]] = LokiOptions
    options: LokiOptions

    def fetch(self, window: FetchWindow | None) -> Iterator[Batch]:
        """Yield one ``observations`` batch (source ``loki``) holding every entry of the
        window, in time order."""
        opts = self.options
        start, end = resolve_window(window, opts.start, opts.end, f"loki {opts.url}")
        nodes = (window.nodes if window and window.nodes else opts.nodes)
        query = build_logql(opts, self.cluster, nodes)
        headers = {"X-Scope-OrgID": opts.org_id} if opts.org_id else {}
        client = HttpClient(
            opts.url, token_env=opts.token_env, timeout=opts.timeout,
            max_attempts=opts.max_attempts, headers=headers,
        )
        start_ns, end_ns = _ns(start), _ns(end)
        input_id = "loki:" + client.url(PATH, {"query": query, "start": start_ns, "end": end_ns})
        entries = self._read_pages(client, query, start_ns, end_ns)
        rows = entries.sort("ns", "stream", maintain_order=True).with_row_index("seq").select(
            ts=pl.from_epoch(pl.col("ns") // 1000, time_unit="us").dt.replace_time_zone("UTC"),
            ts_source=pl.lit("line"),
            node=pl.col("node"),
            attempt_id=pl.lit(None, dtype=pl.String),
            rank=pl.lit(None, dtype=pl.Int32),
            program=pl.col("program"),
            message=pl.col("line"),
            origin=pl.concat_str(pl.lit("loki:"), pl.col("stream"), pl.lit("@"), pl.col("ns").cast(pl.String)),
            seq=pl.col("seq").cast(pl.Int64),
            input_id=pl.lit(input_id),
        )
        yield Batch(
            table="observations", rows=rows, cluster=self.cluster, input_id=input_id,
            source="loki", fetched=rows.height,
        )

    def _read_pages(self, client: HttpClient, query: str, start_ns: int, end_ns: int) -> pl.DataFrame:
        """Every entry in ``[start_ns, end_ns)``; see the module docstring for the paging."""
        opts = self.options
        cursor = start_ns
        seen = pl.DataFrame(schema=_ENTRY_SCHEMA)  # entries at ns == cursor already kept
        pages = []
        for _ in range(opts.max_pages):
            answer = client.get_json(PATH, {
                "query": query, "start": cursor, "end": end_ns, "limit": opts.limit,
                "direction": "forward",
            })
            page = streams_to_entries(_streams(answer, client.url(PATH)), opts.node_label, opts.program_label)
            fresh = page.join(seen, on=_ENTRY_KEY, how="anti", nulls_equal=True)
            pages.append(fresh)
            if page.height < opts.limit:
                return pl.concat(pages)
            last_ns = page["ns"].max()
            if last_ns == cursor:
                # A full page inside one nanosecond: more entries may share it, and no
                # start time can reach past them.
                raise ConnectorError(
                    f"loki {opts.url}: {opts.limit} or more entries share the nanosecond "
                    f"{cursor}; paging cannot pass them — raise limit (up to the server's "
                    "max_entries_limit_per_query)"
                )
            seen = page.filter(pl.col("ns") == last_ns)
            cursor = last_ns
        raise ConnectorError(
            f"loki {opts.url}: window not exhausted after {opts.max_pages} pages — narrow the "
            "window or raise max_pages"
        )


_ENTRY_SCHEMA = {
    "ns": pl.Int64, "line": pl.String, "stream": pl.String, "node": pl.String,
    "program": pl.String,
}


def _streams(answer: dict, where: str) -> list[dict]:
    if answer.get("status") != "success":
        raise ConnectorError(f"{where}: Loki answered status {answer.get('status')!r}: "
                             f"{str(answer)[:200]} — check the LogQL query")
    data = answer.get("data") or {}
    if data.get("resultType") != "streams":
        raise ConnectorError(
            f"{where}: expected resultType 'streams', got {data.get('resultType')!r} "
            "— the query must be a log query, not a metric query"
        )
    return data.get("result") or []


def _ns(value: datetime) -> int:
    """Nanoseconds since the epoch, exactly (no float rounding)."""
    value = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
