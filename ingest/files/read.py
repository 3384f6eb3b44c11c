"""Read one log file into observation rows and rejects (no lake access)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ingest.files.common import (
    PARSED_COLUMNS, TS_DTYPE, FilesError, ParseContext, file_mtime, fill_stamps, read_lines,
)
from ingest.files.detect import PARSERS, check_source, detect_source
from ingest.schema import OBSERVATIONS, REJECTS


@dataclass(frozen=True)
class ParsedFile:
    """One file, parsed.

    ``observations`` has exactly the ``OBSERVATIONS`` columns (``attempt_id`` still null:
    tying a file to an attempt needs the lake, see :func:`ingest.files.land.tie_to_attempt`);
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


def as_utc(moment: datetime | None) -> datetime | None:
    """``moment`` in UTC; a naive datetime is taken to be UTC already."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def read_log_file(
    path: str | Path,
    *,
    source: str | None = None,
    year: int | None = None,
    boot_time: datetime | None = None,
    default_node: str | None = None,
    ingest_time: datetime | None = None,
    end_at_ingest: bool = False,
) -> ParsedFile:
    """Parse the log file at ``path`` into observations and rejects.

    ``source`` forces a parser (``syslog``, ``journald``, ``kmsg``, ``app``, ``kubectl``);
    by default the format is detected from the first lines. ``year`` is the year of the
    first year-less stamp (RFC 3164, glog; default: anchored to the file's mtime),
    ``boot_time`` converts kernel monotonic stamps, ``default_node`` is the node of lines
    that name none, ``ingest_time`` (default: now) stamps rejects and lines of a file with
    no time at all; ``end_at_ingest`` places a kernel log with no boot time as if it ended
    then (one-shot diagnosis) instead of rejecting its lines. Raises :class:`FilesError` for a missing file or an unknown source.
    """
    path = Path(path)
    if not path.is_file():
        raise FilesError(f"{path}: no such file; check the path")
    if source is not None:
        check_source(source)
    lines, blank = read_lines(path)
    name = source or detect_source(lines)
    ingest_time = as_utc(ingest_time) or datetime.now(timezone.utc)
    ctx = ParseContext(
        path=path,
        mtime=file_mtime(path),
        year=year,
        boot_time=as_utc(boot_time),
        default_node=default_node,
        ingest_time=ingest_time,
        end_at_ingest=end_at_ingest,
    )
    parsed = PARSERS[name](lines, ctx).select(PARSED_COLUMNS)
    input_id = str(path.resolve())
    origin = pl.concat_str([pl.lit(input_id + ":"), pl.col("seq").cast(pl.String)])
    accepted = fill_stamps(parsed.filter(pl.col("reason").is_null()), None, ingest_time)
    observations = accepted.with_columns(
        pl.lit(None, dtype=pl.String).alias("attempt_id"),
        origin.alias("origin"),
        pl.lit(input_id).alias("input_id"),
    ).select(OBSERVATIONS.names)
    rejects = (
        parsed.filter(pl.col("reason").is_not_null())
        .join(lines, on="seq", how="left", maintain_order="left")
        .select(
            pl.lit(ingest_time, dtype=TS_DTYPE).alias("ts_ingest"),
            pl.lit(name).alias("source"),
            origin.alias("origin"),
            "reason",
            pl.col("line").alias("raw"),
            pl.lit(input_id).alias("input_id"),
        )
        .select(REJECTS.names)
    )
    return ParsedFile(path, input_id, name, lines.height, blank, observations, rejects)
