"""Shared pieces of the log-file parsers: reading files in batches, the parser contract, stamps.

Files are parsed in batches: the lines of many files are concatenated into one frame and
every parser runs once per batch. Every parser is a function ``parse(lines, ctx) ->
pl.DataFrame``. ``lines`` has ``file`` (UInt32, the file's index in the batch; the rows of
one file are contiguous and in file order), ``seq`` (1-based line number in its file,
Int64), ``line`` (String, no line terminator, never blank) and ``mtime`` (the file's
modification time, ``Datetime("us", "UTC")``). Anything that depends on the file (year
rollover, inherited stamps, a boot time read from the file) is computed per ``file``
(window expressions), never across files. The result must keep every input row, in order,
with these columns:

* ``file``, ``seq`` — unchanged;
* ``ts`` — ``Datetime("us", "UTC")`` printed on (or derived from) the line, null if none;
* ``ts_kind`` — ``"line"``, ``"monotonic"`` or ``"ingest"`` where ``ts`` is set, else null;
* ``node``, ``program``, ``message`` — String (``message`` = text after every prefix);
* ``rank`` — Int32, the global rank a launcher prefix names;
* ``reason`` — null when the line parsed, else why it goes to ``rejects``;

and may add the :data:`PLACEMENT_COLUMNS` (null where absent):

* ``local_rank`` — Int32, a rank a launcher prefix names among its node's workers only;
* ``slot`` — Int32, the Slurm task id an ``srun --label`` prefix names, which says the
  node the line ran on;

and :data:`ZONELESS` (false where absent):

* ``zoneless`` — Boolean, true where ``ts`` comes from a stamp that carried no zone and was
  read in ``ctx.timezone`` (RFC 3164, glog, ``dmesg -T``, ISO-8601 without an offset): only
  those lines move when a landing names another zone.

Parsers never fill missing stamps: :func:`fill_stamps` does that once for every format.

The parsers' regexes spell digits ``[0-9]``, not ``\\d``: Polars' regex engine reads ``\\d``
as every script's decimal digits (hundreds of ranges); with ASCII digits the automaton is
smaller and peeling a header off every line about a tenth faster. Stamps, ranks and pids
are ASCII.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

TS_DTYPE = pl.Datetime("us", "UTC")

PARSED_COLUMNS = ("file", "seq", "ts", "ts_kind", "node", "rank", "program", "message", "reason")
PLACEMENT_COLUMNS = ("local_rank", "slot")
"""Where a line ran, when its launcher prefix tells only part of it: tying the line to its
attempt (:func:`ingest.files.land.tie_to_attempts`) turns them into ``rank`` and ``node``."""
ZONELESS = "zoneless"
"""The parser column that says a line's stamp was read in the landing's time zone."""
ZONE_SUFFIX = r"(?:Z|[+-][0-9]{2}:?[0-9]{2})$"
"""The zone at the end of an ISO-8601 stamp (``Z``, ``+01:00``, ``-0500``)."""

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

REPLACEMENT = "\ufffd".encode()
UTF8_BOM = b"\xef\xbb\xbf"


class FilesError(ValueError):
    """Bad input for the file connector (missing path, unknown source, empty directory)."""


@dataclass(frozen=True)
class ParseContext:
    """What a parser may need besides the lines (the same for every file of a batch).

    ``year`` is the year of the first year-less stamp of each file (``None``: anchor the
    last one to the file's ``mtime``); ``boot_time`` converts kernel monotonic stamps
    (``None``: read it from each file, see :mod:`ingest.files.kmsg`); ``default_node`` is
    the node of lines that do not name one; ``node_pattern`` (instead of ``default_node``)
    takes that node from each file's path, as the first group of the regex. ``end_at_ingest``
    lets a kernel log without any boot time be placed as if its last line was written at
    ``ingest_time`` (one-shot diagnosis of a pasted ``dmesg``: the order is exact, the wall
    time a guess). ``timezone`` (an IANA name) is the zone of stamps that carry none
    (RFC 3164, glog, ``dmesg -T``, ISO-8601 without an offset).
    """

    year: int | None
    boot_time: datetime | None
    default_node: str | None
    ingest_time: datetime
    end_at_ingest: bool = False
    node_pattern: str | None = None
    timezone: str = "UTC"


@dataclass(frozen=True)
class FileBatch:
    """Files read into one frame: ``lines`` (see the module docstring) and ``files`` (one
    row per file: ``file``, ``input_id`` = the path as given, ``mtime``, ``blank`` = blank
    lines skipped, ``bytes`` = decompressed size, ``cut`` = why its gzip data stopped short,
    null when it did not)."""

    lines: pl.DataFrame
    files: pl.DataFrame


GAP_LOOKBACK = timedelta(hours=6)
"""How far before a wall time the spring change skipped the offset in force before the change
is read (zones never change their offset twice within hours)."""


def local_stamps(text: pl.Expr, fmt: str, timezone: str) -> pl.Expr:
    """Stamps without a zone (``text`` in ``fmt``) read as wall time in ``timezone``, in
    UTC. At the autumn change an hour repeats: its stamps take the earlier instant (a file's
    stamps that go back show the second pass: :func:`second_pass_by_order`). A wall
    time the spring change skipped (``02:30`` in Berlin on the last Sunday of March) cannot
    come from a clock that kept the zone; it comes from one that did not change (a node or
    container on UTC or standard time whose files are landed with the site's zone), and is
    read with the offset in force before the change, as Python's ``zoneinfo`` reads it."""
    if timezone == "UTC":
        return text.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False)
    naive = text.str.to_datetime(fmt, time_unit="us", strict=False)
    local = naive.dt.replace_time_zone(timezone, ambiguous="earliest", non_existent="null")
    before = (naive - GAP_LOOKBACK).dt.replace_time_zone(timezone, ambiguous="earliest", non_existent="null")
    skipped = (naive - before.dt.base_utc_offset() - before.dt.dst_offset()).dt.replace_time_zone("UTC")
    return pl.coalesce(local.dt.convert_time_zone("UTC"), skipped.cast(TS_DTYPE))


def check_timezone(timezone: str) -> None:
    """Raise :class:`FilesError` naming ``timezone`` unless it is an IANA zone name."""
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise FilesError(f"unknown time zone {timezone!r}: give an IANA name such as America/Chicago or UTC") from None


def read_bytes(path: str | Path) -> tuple[bytes, int]:
    """The decompressed bytes of ``path`` and its mtime in µs since the epoch; gzip data cut
    short or corrupt is an error naming the file (:func:`read_log_bytes` keeps what can be
    read of it instead)."""
    raw, mtime_us, cut = read_log_bytes(path)
    if cut:
        raise FilesError(f"{path}: corrupt gzip data ({cut}); re-copy the file")
    return raw, mtime_us


def read_log_bytes(path: str | Path) -> tuple[bytes, int, str | None]:
    """The decompressed bytes of ``path``, its mtime in µs since the epoch, and why its gzip
    data stopped short (``None`` when it did not).

    Gzip input (by magic number, whatever the name) is decompressed; of gzip data cut short
    (a copy interrupted mid-file, a rotation still being written) or corrupt past some
    point, what decompresses before the damage is kept (:func:`_gunzip_readable`): a log's
    lines up to the cut are as good as any. A UTF-8 byte-order
    mark at the start (Windows editors and some exporters write one) is dropped: it is no
    part of the first line. Plain ``os.read`` calls: a million small job outputs make the
    per-file cost of buffered file objects show (about three times slower).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        stat = os.fstat(fd)
        raw = os.read(fd, stat.st_size + 1)
        if len(raw) != stat.st_size:  # grew or shrank since the stat, or a short read
            chunks = [raw]
            while chunk := os.read(fd, 1 << 24):
                chunks.append(chunk)
            raw = b"".join(chunks)
    finally:
        os.close(fd)
    mtime_us = stat.st_mtime_ns // 1000
    cut = None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            # The line the damage cut in two is no line.
            readable = _gunzip_readable(raw)
            raw, cut = readable[:readable.rfind(b"\n") + 1], str(exc) or type(exc).__name__
    return raw.removeprefix(UTF8_BOM), mtime_us, cut


def _gunzip_readable(raw: bytes) -> bytes:
    """What decompresses of damaged gzip data, member after member, up to the damage (a
    truncated member gives its data up to the cut)."""
    out: list[bytes] = []
    while raw[:2] == b"\x1f\x8b":
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            for start in range(0, len(raw), 1 << 20):
                out.append(member.decompress(raw[start:start + (1 << 20)]))
                if member.eof:
                    break
        except zlib.error:
            break
        if not member.eof:
            out.append(member.flush())
            break
        raw = member.unused_data
    return b"".join(out)


def _texts(raws: Sequence[bytes]) -> pl.Series:
    """The files' contents as text: invalid UTF-8 and NUL bytes become U+FFFD."""
    # Polars checks UTF-8 without the GIL and without a Python string per file (the other
    # thread of a landing keeps running); one invalid file fails the whole check, and then
    # Python decodes each file with replacement.
    try:
        texts = pl.Series(raws, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:
        return pl.Series([raw.replace(b"\x00", REPLACEMENT).decode("utf-8", "replace") for raw in raws], dtype=pl.String)
    # Most batches hold no NUL: looking first spares a pass over every line.
    if any(b"\x00" in raw for raw in raws):
        texts = texts.str.replace_all("\x00", "\ufffd", literal=True)
    return texts


ANSI_SGR = r"\x1b\[[0-9;]*m"
"""A terminal's select-graphic-rendition code (colour, bold): ``ESC [ params m``."""
REDRAWN = r"^((?: *[0-9]+: )?(?:\[[A-Za-z_]+[0-9]+\]:)?)[^\n]*\r([^\r]+)$"
"""A line redrawn in place with carriage returns (tqdm's progress bar, then whatever the
program printed after its last redraw): group 1 the ``srun --label`` and torchrun tags the
line began with, group 2 the text after the last ``\r``, what a terminal shows."""


def lines_of(
    paths: Sequence[str | Path], raws: Sequence[bytes], mtimes_us: Sequence[int],
    cuts: Sequence[str | None] | None = None,
) -> FileBatch:
    """Split the contents of several files into one frame of non-blank lines.

    Bytes that are not UTF-8 become U+FFFD, and so do NUL bytes (never meaningful in a log
    line). Terminal colour and style codes (ANSI SGR, ``ESC[1;31m``: loguru's ``colorize``,
    rich's handler, a pty's output) are removed: they split stamps and words apart. Lines
    split on ``\\n`` only; the ``\\r`` of CRLF is dropped, and a line redrawn with ``\\r``
    (a progress bar, the error printed right after its last redraw) keeps what a terminal
    would show, behind the tags it began with (:data:`REDRAWN`). ``seq`` is the
    1-based physical line number, so ``origin`` points at the right line even when blank
    lines were skipped. ``cuts``: per file, why its gzip data stopped short (its ``cut``,
    :func:`read_log_bytes`), if it did.
    """
    files = pl.DataFrame({
        "file": pl.Series(range(len(paths)), dtype=pl.UInt32),
        "input_id": [str(p) for p in paths],
        "mtime": pl.Series(mtimes_us, dtype=pl.Int64).cast(TS_DTYPE),
        "bytes": pl.Series([len(raw) for raw in raws], dtype=pl.Int64),
        "cut": pl.Series(cuts if cuts is not None else [None] * len(paths), dtype=pl.String),
        "_text": _texts(raws),
    })
    # The piece after a file's last newline (all of an empty file) is empty and not a line:
    # a final newline ends the last line, it does not start another.
    frame = (
        files.select("file", "mtime", pl.col("_text").str.split("\n").alias("line"))
        .with_columns(pl.col("line").list.len().alias("_pieces"))
        .with_columns(pl.int_ranges(1, pl.col("_pieces") + 1, dtype=pl.Int64).alias("seq"))
        .explode(["line", "seq"])
    )
    end = (pl.col("seq") == pl.col("_pieces")) & (pl.col("line") == "")
    line = pl.col("line")
    if any(b"\r" in raw for raw in raws):
        line = line.str.strip_suffix("\r")
        line = pl.when(line.str.contains("\r", literal=True)).then(line.str.replace(REDRAWN, "${1}${2}")).otherwise(line)
    if any(b"\x1b[" in raw for raw in raws):  # most batches hold no terminal codes: no copy of every line
        line = line.str.replace_all(ANSI_SGR, "")
    frame = frame.select("file", "seq", line, "mtime", end.alias("_end")).with_columns(
        (pl.col("line").str.strip_chars().str.len_bytes() == 0).alias("_blank")
    )
    counts = frame.filter(pl.col("_blank") & ~pl.col("_end")).group_by("file").agg(pl.len().cast(pl.Int64).alias("blank"))
    files = files.drop("_text").join(counts, on="file", how="left").with_columns(pl.col("blank").fill_null(0))
    return FileBatch(frame.filter(~pl.col("_blank")).drop("_end", "_blank"), files.sort("file"))


def month_number(name: pl.Expr) -> pl.Expr:
    """Month number (Int32) from an English three-letter month name; null otherwise."""
    return name.replace_strict(MONTHS, default=None, return_dtype=pl.Int32)


def bsd_stamp_parts(month: str, day: str, clock: str) -> list[pl.Expr]:
    """``_month`` and ``_rest`` (``"DD HH:MM:SS"``) from the groups of an RFC 3164 stamp
    (``Nov  3 15:32:38``), ready for :func:`stamps_without_year`."""
    return [
        month_number(pl.col(month)).alias("_month"),
        pl.concat_str([pl.col(day).str.zfill(2), pl.col(clock)], separator=" ").alias("_rest"),
    ]


def stamps_without_year(
    frame: pl.DataFrame, month: str, rest: str, ctx: ParseContext
) -> pl.Series:
    """Full timestamps for year-less stamps (RFC 3164, glog), vectorized over every file.

    ``month`` is an Int32 column (null where the line has no such stamp) and ``rest`` a
    String column ``"DD HH:MM:SS[.frac]"``; ``frame`` also has ``file`` and ``mtime``.
    Within each file, years roll over where the month drops by :data:`ROLLOVER_DROP` or
    more between consecutive stamped lines. With ``ctx.year`` the first stamp of each file
    is in that year; otherwise the last stamp of a file is placed in its mtime's year, or
    the year before when that would put it after the mtime (a file cannot hold lines
    written after it was last modified), and any single line still in the future moves
    back a year.
    """
    m = pl.col(month)
    # Only stamped lines take part (in application logs most lines carry no such stamp):
    # within a file the previous stamped line is then simply the previous row, and lines
    # without a stamp get null below.
    stamped = frame.select("file", "mtime", m.alias("_m"), pl.col(rest).alias("_rest")).with_row_index("_row")
    stamped = stamped.filter(pl.col("_m").is_not_null())
    nulls = pl.repeat(None, frame.height, dtype=TS_DTYPE, eager=True).alias("ts")
    if stamped.is_empty():
        return nulls
    wraps = (pl.col("_m").shift(1).over("file") - pl.col("_m") >= ROLLOVER_DROP).fill_null(False)
    work = stamped.with_columns(wraps.cast(pl.Int32).cum_sum().over("file").alias("_wrap"))

    def build(years: pl.Expr) -> pl.Expr:
        text = pl.concat_str(
            [years.cast(pl.String), pl.col("_m").cast(pl.String).str.zfill(2), pl.col("_rest")], separator="-"
        )
        return local_stamps(text, "%Y-%m-%d %H:%M:%S%.f", ctx.timezone)

    if ctx.year is not None:
        stamps = work.select(build(pl.col("_wrap") + ctx.year).alias("ts")).to_series()
    else:
        limit = pl.col("mtime") + FUTURE_SLACK
        # The last stamped line of each file decides whether the file ends in its mtime's year.
        ends = (
            work.group_by("file").agg(pl.all().last())
            .select("file", (build(pl.col("mtime").dt.year()) > limit).fill_null(False).cast(pl.Int32).alias("_back"))
        )
        work = work.join(ends, on="file", how="left", maintain_order="left")
        end_year = pl.col("mtime").dt.year() - pl.col("_back").fill_null(0)
        ts = build(pl.col("_wrap") - pl.col("_wrap").max().over("file") + end_year)
        stamps = work.select(pl.when(ts > limit).then(ts.dt.offset_by("-1y")).otherwise(ts).alias("ts")).to_series()
    return nulls.scatter(work["_row"], stamps)


def seconds_to_us(text: pl.Expr) -> pl.Expr:
    """``"1234.567890"`` seconds (the fraction optional, cut to microseconds) to Int64
    microseconds, whole and fraction apart so no microsecond is lost to a float."""
    parts = text.str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64)
    frac = parts.struct.field("field_1").fill_null("").str.slice(0, 6).str.pad_end(6, "0").cast(pl.Int64)
    return whole * 1_000_000 + frac


def epoch_stamps(text: pl.Expr) -> pl.Expr:
    """Seconds since the epoch (:func:`seconds_to_us` text) as UTC timestamps."""
    return pl.from_epoch(seconds_to_us(text), time_unit="us").dt.replace_time_zone("UTC")


def parse_iso(text: pl.Expr, timezone: str = "UTC") -> pl.Expr:
    """ISO-8601 / RFC 3339 stamps (``T`` or space, ``.`` or ``,`` fraction, optional
    ``Z``/offset) to UTC. Stamps without an offset are wall time in ``timezone``."""
    norm = text.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
    with_zone = norm.str.replace(r"Z$", "+00:00").str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f%#z", time_unit="us", strict=False
    )
    # A stamp ending in a zone cannot parse without one: skipping those spares a failed parse
    # of every stamp of a zoned format (RFC 3339 syslog, kubectl).
    naive = local_stamps(pl.when(~iso_zoned(norm)).then(norm), "%Y-%m-%d %H:%M:%S%.f", timezone)
    return pl.coalesce(with_zone.dt.convert_time_zone("UTC"), naive)


def iso_zoned(text: pl.Expr) -> pl.Expr:
    """True for ISO-8601 stamps that end in a zone (:data:`ZONE_SUFFIX`), null for null."""
    return text.str.contains(ZONE_SUFFIX)


FOLD_BACK = timedelta(minutes=5)
"""How far a zoneless stamp of the repeated autumn hour must fall behind the file's latest
stamp so far to say the clock went back: lines of several processes interleave out of
order by seconds, not minutes."""


def second_pass_by_order(parsed: pl.DataFrame, timezone: str) -> pl.DataFrame:
    """Zoneless stamps (:data:`ZONELESS`) of the hour the autumn change repeats read at
    their later instant once their file's stamps went back: :func:`local_stamps` reads that
    hour's wall times at their earlier instant, so a line of the second pass reads up to an
    hour before the lines printed just before it. The first stamp of the repeated hour that
    falls more than :data:`FOLD_BACK` behind the file's latest stamp so far, and whose
    later instant does not, starts the second pass: from it on, every stamp of that hour
    in the file (on that local date) takes its later instant. A file that began in the
    second pass shows no such step back (tying it to its attempt moves it,
    :func:`ingest.files.land.tie_to_attempts`). Rows are in file order, as parsers keep
    them."""
    if timezone == "UTC" or ZONELESS not in parsed.columns:
        return parsed
    ts = pl.col("ts")
    zoneless = pl.col(ZONELESS).fill_null(False) & ts.is_not_null()
    if not parsed.select(zoneless.any()).item():
        return parsed
    wall = ts.dt.convert_time_zone(timezone).dt.replace_time_zone(None)
    later = wall.dt.replace_time_zone(timezone, ambiguous="latest", non_existent="null").dt.convert_time_zone("UTC")
    repeated = zoneless & (later != ts).fill_null(False)
    if not parsed.select(repeated.any()).item():
        return parsed
    seen = ts.cum_max().shift(1).over("file")
    step_back = repeated & (ts < seen - FOLD_BACK).fill_null(False) & (later >= seen - FOLD_BACK).fill_null(False)
    started = step_back.cast(pl.Int8).cum_max().over("file", wall.dt.date()) == 1
    return parsed.with_columns(
        pl.when(repeated & started).then(later).otherwise(ts).cast(TS_DTYPE).alias("ts")
    )


def fill_stamps(parsed: pl.DataFrame, ingest_time: datetime) -> pl.DataFrame:
    """Give every accepted line a time and say how it was obtained.

    Within each file, lines without a stamp inherit the previous stamped line
    (``inferred``); lines before the first stamp take the next stamped line's time
    (``inferred``, and ``_backfilled`` true: that time is the latest they can have been
    printed, not the earliest, so tying the file to an attempt moves them to its start);
    in a file with no stamp at all, the ingest time (``ingest``; tying the file to an
    attempt may later replace it with the attempt's start). Nothing is dropped.
    """
    ts = pl.col("ts")
    # Columns, not expressions: the outputs read them, and the windows would run twice.
    filled = parsed.with_columns(ts.forward_fill().over("file").alias("_before"))
    filled = filled.with_columns(pl.col("_before").fill_null(ts.backward_fill().over("file")).alias("_inherited"))
    inherited = pl.col("_inherited")
    return filled.with_columns(
        pl.when(ts.is_not_null()).then(pl.col("ts_kind"))
        .when(inherited.is_not_null()).then(pl.lit("inferred"))
        .otherwise(pl.lit("ingest")).alias("ts_source"),
        pl.coalesce(inherited, pl.lit(ingest_time, dtype=TS_DTYPE)).alias("ts"),
        (pl.col("_before").is_null() & inherited.is_not_null()).alias("_backfilled"),
    ).drop("_inherited", "_before")


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
