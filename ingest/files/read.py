"""Parse log files into observation rows and rejects (no lake access), many files at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from ingest.files.common import (
    PARSED_COLUMNS, PLACEMENT_COLUMNS, TS_DTYPE, ZONELESS, FileBatch, FilesError, ParseContext, check_timezone,
    fill_stamps, lines_of, read_bytes, second_pass_by_order,
)
from ingest.files.detect import PARSERS, check_source, detect_sources
from ingest.schema import OBSERVATIONS, REJECTS


@dataclass(frozen=True)
class ParsedFile:
    """One file, parsed.

    ``observations`` has exactly the ``OBSERVATIONS`` columns (``attempt_id`` still null:
    tying a file to an attempt needs the lake, see :func:`ingest.files.land.tie_to_attempts`);
    ``rejects`` the ``REJECTS`` columns. ``lines`` counts the non-blank lines read, and
    ``lines == observations.height + rejects.height`` always holds; ``blank`` counts the
    blank lines skipped (they carry nothing).
    """

    path: Path
    input_id: str
    source: str
    lines: int
    blank: int
    observations: pl.DataFrame
    rejects: pl.DataFrame


@dataclass(frozen=True)
class ParsedBatch:
    """A batch of files, parsed.

    ``files`` has one row per file: ``file``, ``input_id``, ``mtime``, ``bytes``,
    ``blank``, ``source`` (given or detected), ``lines`` (non-blank lines read) and
    ``zoneless`` (accepted lines whose stamp carried no zone, read in the landing's).
    ``observations`` has the ``OBSERVATIONS`` columns plus ``file``, ``source``, the
    :data:`PLACEMENT_COLUMNS` and ``_backfilled`` (a line before its file's first stamp,
    :func:`ingest.files.common.fill_stamps`), for tying (see
    :func:`ingest.files.land.tie_to_attempts`);
    ``rejects`` the ``REJECTS`` columns plus ``file``. Per file, ``lines`` equals its
    observations plus its rejects.
    """

    files: pl.DataFrame
    observations: pl.DataFrame
    rejects: pl.DataFrame


def as_utc(moment: datetime | None) -> datetime | None:
    """``moment`` in UTC; a naive datetime is taken to be UTC already."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_batch(batch: FileBatch, ctx: ParseContext, source: str | None = None) -> ParsedBatch:
    """Parse every file of ``batch``: detect each file's source (unless ``source`` forces
    one), run each parser once over the lines of all its files, fill missing stamps per
    file and split accepted lines from rejects."""
    lines = batch.lines
    if source is None:
        files = batch.files.join(detect_sources(lines), on="file", how="left", maintain_order="left")
        files = files.with_columns(pl.col("source").fill_null("app"))
        by_source = lines.join(files.select("file", "source"), on="file", how="left", maintain_order="left")
        groups = by_source.partition_by("source", as_dict=True, maintain_order=True, include_key=False)
        parts = [(name, part) for (name,), part in groups.items()]
    else:
        files = batch.files.with_columns(pl.lit(source).alias("source"))
        parts = [(source, lines)]
    counts = lines.group_by("file").len("lines").with_columns(pl.col("lines").cast(pl.Int64))
    files = files.join(counts, on="file", how="left", maintain_order="left").with_columns(pl.col("lines").fill_null(0))
    parsed = [
        # Parsers keep every row in order, so the raw line and the source line up by position.
        _contract(PARSERS[name](part, ctx)).with_columns(part["line"], pl.lit(name).alias("source"))
        for name, part in parts if part.height
    ]
    if parsed:
        frame = pl.concat(parsed).join(files.select("file", "input_id"), on="file", how="left", maintain_order="left")
    else:
        frame = pl.DataFrame(schema={
            **dict.fromkeys(PARSED_COLUMNS, pl.String), "file": pl.UInt32, "seq": pl.Int64, "ts": TS_DTYPE,
            "rank": pl.Int32, **dict.fromkeys(PLACEMENT_COLUMNS, pl.Int32), ZONELESS: pl.Boolean, "line": pl.String,
            "source": pl.String, "input_id": pl.String,
        })
    if ctx.node_pattern is not None:
        frame = frame.with_columns(pl.coalesce("node", pl.col("input_id").str.extract(ctx.node_pattern, 1)).alias("node"))
    origin = pl.concat_str([pl.col("input_id"), pl.lit(":"), pl.col("seq").cast(pl.String)]).alias("origin")
    accepted = fill_stamps(second_pass_by_order(frame.filter(pl.col("reason").is_null()), ctx.timezone), ctx.ingest_time)
    zoneless = accepted.group_by("file").agg(pl.col(ZONELESS).sum().cast(pl.Int64))
    files = files.join(zoneless, on="file", how="left", maintain_order="left").with_columns(
        pl.col(ZONELESS).fill_null(0))
    observations = accepted.with_columns(pl.lit(None, dtype=pl.String).alias("attempt_id"), origin).select(
        *OBSERVATIONS.names, "file", "source", *PLACEMENT_COLUMNS, "_backfilled", ZONELESS
    )
    rejects = frame.filter(pl.col("reason").is_not_null()).select(
        pl.lit(ctx.ingest_time, dtype=TS_DTYPE).alias("ts_ingest"),
        "source",
        origin,
        "reason",
        pl.col("line").alias("raw"),
        "input_id",
        "file",
    )
    return ParsedBatch(files, observations, rejects)


def _contract(parsed: pl.DataFrame) -> pl.DataFrame:
    """A parser's output in the contract's columns: :data:`PARSED_COLUMNS`, then the
    :data:`PLACEMENT_COLUMNS` (null where the parser gives none) and :data:`ZONELESS` (false
    where it gives none)."""
    placement = [pl.col(c) if c in parsed.columns else pl.lit(None, dtype=pl.Int32).alias(c) for c in PLACEMENT_COLUMNS]
    zoneless = pl.col(ZONELESS) if ZONELESS in parsed.columns else pl.lit(False).alias(ZONELESS)
    return parsed.select(*PARSED_COLUMNS, *placement, zoneless)


def read_log_file(
    path: str | Path,
    *,
    source: str | None = None,
    year: int | None = None,
    boot_time: datetime | None = None,
    default_node: str | None = None,
    ingest_time: datetime | None = None,
    end_at_ingest: bool = False,
    timezone: str = "UTC",
) -> ParsedFile:
    """Parse the log file at ``path`` into observations and rejects.

    ``source`` forces a parser (``syslog``, ``journald``, ``kmsg``, ``app``, ``kubectl``);
    by default the format is detected from the first lines. ``year`` is the year of the
    first year-less stamp (RFC 3164, glog; default: anchored to the file's mtime),
    ``boot_time`` converts kernel monotonic stamps, ``default_node`` is the node of lines
    that name none, ``ingest_time`` (default: now) stamps rejects and lines of a file with
    no time at all; ``end_at_ingest`` places a kernel log with no boot time as if it ended
    then (one-shot diagnosis) instead of rejecting its lines; ``timezone`` (an IANA name)
    is the zone of stamps that carry none (RFC 3164, glog, ``dmesg -T``, ISO-8601 without
    an offset; default UTC). Raises :class:`FilesError` for a missing file, an unknown
    source or time zone. The same code parses batches of files
    (:func:`parse_batch`), so one file alone gives the same rows as inside a batch.
    """
    path = Path(path)
    if not path.is_file():
        raise FilesError(f"{path}: no such file; check the path")
    if source is not None:
        check_source(source)
    check_timezone(timezone)
    resolved = path.resolve()
    raw, mtime_us = read_bytes(resolved)
    ctx = ParseContext(
        year=year,
        boot_time=as_utc(boot_time),
        default_node=default_node,
        ingest_time=as_utc(ingest_time) or datetime.now(UTC),
        end_at_ingest=end_at_ingest,
        timezone=timezone,
    )
    parsed = parse_batch(lines_of([resolved], [raw], [mtime_us]), ctx, source)
    info = parsed.files.row(0, named=True)
    return ParsedFile(
        path, info["input_id"], info["source"], info["lines"], info["blank"],
        untied_ranks(parsed.observations).select(OBSERVATIONS.names), parsed.rejects.select(REJECTS.names),
    )


def untied_ranks(observations: pl.DataFrame) -> pl.DataFrame:
    """Ranks of lines tied to no attempt: a local rank, or else a Slurm task id, is the
    best guess of the global one (right for a one-node job, the usual case of a file read
    alone)."""
    return observations.with_columns(pl.coalesce("rank", "local_rank", "slot").alias("rank"))
