"""Shared pieces of the log-file parsers: reading lines, the parser contract, stamps.

Every parser is a function ``parse(lines, ctx) -> pl.DataFrame``. ``lines`` has ``seq``
(1-based line number, Int64) and ``line`` (String, no line terminator, never blank). The
result must keep every input row, in order, with these columns:

* ``seq`` — unchanged;
* ``ts`` — ``Datetime("us", "UTC")`` printed on (or derived from) the line, null if none;
* ``ts_kind`` — ``"line"``, ``"monotonic"`` or ``"ingest"`` where ``ts`` is set, else null;
* ``node``, ``program``, ``message`` — String (``message`` = text after every prefix);
* ``rank`` — Int32, the global rank a launcher prefix names;
* ``reason`` — null when the line parsed, else why it goes to ``rejects``.

Parsers never fill missing stamps: :func:`fill_stamps` does that once for every format.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

TS_DTYPE = pl.Datetime("us", "UTC")

PARSED_COLUMNS = ("seq", "ts", "ts_kind", "node", "rank", "program", "message", "reason")

MONTHS = {
    "Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6,
    "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12,
}

ROLLOVER_DROP = 6
"""A month that falls by at least this much from the previous stamped line starts a new
year (Dec → Jan is -11). Smaller drops are out-of-order lines, not a new year."""

FUTURE_SLACK = timedelta(days=1)
"""How far past the file's mtime a year-less stamp may fall before it is taken to belong
to the previous year (covers time zones between the writer and this machine)."""


class FilesError(ValueError):
    """Bad input for the file connector (missing path, unknown source, empty directory)."""


@dataclass(frozen=True)
class ParseContext:
    """What a parser may need besides the lines.

    ``year`` is the year of the first year-less stamp (``None``: anchor the last one to
    ``mtime``); ``boot_time`` converts kernel monotonic stamps; ``default_node`` is the
    node of lines that do not name one. ``end_at_ingest`` lets a kernel log without any
    boot time be placed as if its last line was written at ``ingest_time`` (one-shot
    diagnosis of a pasted ``dmesg``: the order is exact, the wall time a guess).
    """

    path: Path
    mtime: datetime
    year: int | None
    boot_time: datetime | None
    default_node: str | None
    ingest_time: datetime | None = None
    end_at_ingest: bool = False


def read_lines(path: Path) -> tuple[pl.DataFrame, int]:
    """The non-blank lines of ``path`` as a frame (``seq``, ``line``) and the blank count.

    Gzip input (by magic number, whatever the name) is decompressed; bytes that are not
    UTF-8 become U+FFFD. ``seq`` is the 1-based physical line number, so ``origin`` points
    at the right line even when blank lines were skipped.
    """
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise FilesError(f"{path}: corrupt gzip data ({exc}); re-copy the file") from exc
    if not raw:
        return pl.DataFrame(schema={"seq": pl.Int64, "line": pl.String}), 0
    # One column split on a byte that cannot occur once NULs are replaced: the CSV reader
    # is the fastest line splitter at hand (multi-threaded, keeps empty lines as nulls,
    # drops "\r" of CRLF, replaces invalid UTF-8).
    frame = pl.read_csv(
        raw.replace(b"\x00", "\ufffd".encode()),
        has_header=False,
        separator="\x00",
        quote_char=None,
        encoding="utf8-lossy",
        new_columns=["line"],
        infer_schema=False,
    ).with_row_index("seq", offset=1).with_columns(
        pl.col("seq").cast(pl.Int64), pl.col("line").fill_null("")
    )
    blank = pl.col("line").str.strip_chars().str.len_bytes() == 0
    kept = frame.filter(~blank)
    return kept, frame.height - kept.height


def file_mtime(path: Path) -> datetime:
    """The file's modification time in UTC (the anchor for year-less stamps)."""
    return datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)


def month_number(name: pl.Expr) -> pl.Expr:
    """Month number (Int32) from an English three-letter month name; null otherwise."""
    return name.replace_strict(MONTHS, default=None, return_dtype=pl.Int32)


def stamps_without_year(
    frame: pl.DataFrame, month: str, rest: str, ctx: ParseContext
) -> pl.Series:
    """Full timestamps for year-less stamps (RFC 3164, glog), vectorized.

    ``month`` is an Int32 column (null where the line has no such stamp) and ``rest`` a
    String column ``"DD HH:MM:SS[.frac]"``. Years roll over where the month drops by
    :data:`ROLLOVER_DROP` or more between consecutive stamped lines. With ``ctx.year`` the
    first stamp is in that year; otherwise the last stamp is placed in the mtime's year,
    or the year before when that would put it after the mtime (a file cannot hold lines
    written after it was last modified), and any single line still in the future moves
    back a year.
    """
    m = pl.col(month)
    wraps = (m.forward_fill().shift(1) - m >= ROLLOVER_DROP).fill_null(False)
    work = frame.select(
        m.alias("_m"),
        pl.col(rest).alias("_rest"),
        wraps.cast(pl.Int32).cum_sum().alias("_wrap"),
    )

    def build(years: pl.Expr) -> pl.Expr:
        text = pl.concat_str(
            [years.cast(pl.String), pl.col("_m").cast(pl.String).str.zfill(2), pl.col("_rest")], separator="-"
        )
        return text.str.to_datetime(
            "%Y-%m-%d %H:%M:%S%.f", time_unit="us", time_zone="UTC", strict=False
        )

    if ctx.year is not None:
        return work.select(build(pl.col("_wrap") + ctx.year).alias("ts")).to_series()

    total = int(work["_wrap"].max() or 0)
    limit = ctx.mtime + FUTURE_SLACK
    end_year = ctx.mtime.year
    stamped = work.filter(pl.col("_m").is_not_null())
    if stamped.height:
        last = stamped.tail(1).select(build(pl.lit(end_year))).item()
        if last is not None and last > limit:
            end_year -= 1
    ts = build(pl.col("_wrap") - total + end_year)
    return work.select(
        pl.when(ts > limit).then(ts.dt.offset_by("-1y")).otherwise(ts).alias("ts")
    ).to_series()


def parse_iso(text: pl.Expr) -> pl.Expr:
    """ISO-8601 / RFC 3339 stamps (``T`` or space, ``.`` or ``,`` fraction, optional
    ``Z``/offset) to UTC. Stamps without an offset are taken as UTC."""
    norm = text.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
    with_zone = norm.str.replace(r"Z$", "+00:00").str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f%#z", time_unit="us", strict=False
    )
    naive = norm.str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", time_zone="UTC", strict=False
    )
    return pl.coalesce(with_zone.dt.convert_time_zone("UTC"), naive)


def fill_stamps(parsed: pl.DataFrame, fallback: datetime | None, ingest_time: datetime) -> pl.DataFrame:
    """Give every accepted line a time and say how it was obtained.

    Lines without a stamp inherit the previous stamped line of the file (``inferred``);
    lines before the first stamp take the next stamped line's time (``inferred``); in a
    file with no stamp at all, ``fallback`` (the attempt start, ``inferred``) or else the
    ingest time (``ingest``). Nothing is dropped.
    """
    ts = pl.col("ts")
    inherited = ts.forward_fill().fill_null(ts.backward_fill())
    if fallback is not None:
        last = pl.lit(fallback, dtype=TS_DTYPE)
        last_kind = pl.lit("inferred")
    else:
        last = pl.lit(ingest_time, dtype=TS_DTYPE)
        last_kind = pl.lit("ingest")
    return parsed.with_columns(
        pl.when(ts.is_not_null()).then(pl.col("ts_kind"))
        .when(inherited.is_not_null()).then(pl.lit("inferred"))
        .otherwise(last_kind).alias("ts_source"),
        pl.coalesce(inherited, last).alias("ts"),
    )


def peel(frame: pl.DataFrame, column: str, prefix: str, rest: str) -> pl.DataFrame:
    """Match the regex ``prefix`` at the start of ``column``; add its named groups, a
    ``<rest>_prefix`` column (the matched text, null where it does not match) and
    ``rest`` (the text after the match, or all of it where it does not match).

    Capturing only the prefix and slicing the remainder off is several times faster than
    a ``(?P<rest>.*)$`` capture on long lines.
    """
    matched = f"{rest}_prefix"
    frame = frame.with_columns(
        pl.col(column).str.extract_groups(f"^(?P<{matched}>{prefix})").alias("_peel")
    ).unnest("_peel")
    cut = pl.col(matched).str.len_chars().fill_null(0)
    return frame.with_columns(pl.col(column).str.slice(cut).alias(rest))
