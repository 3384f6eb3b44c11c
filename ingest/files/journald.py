"""journald export (``journalctl -o json``): one JSON object per line.

``__REALTIME_TIMESTAMP`` (µs since the epoch, a string) gives ``ts``, ``_HOSTNAME`` the
node, ``SYSLOG_IDENTIFIER`` (else ``_COMM``) the program. ``MESSAGE`` is a string, or an
array of bytes when journald found it not printable (control characters, invalid UTF-8):
those are decoded with invalid bytes replaced. Fields are read with JSON-path matching on
the whole column, not by decoding objects one by one.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ingest.files.common import TS_DTYPE, ParseContext
from ingest.hostlist import short_host

BYTE_ARRAY_MESSAGE = r'"MESSAGE"\s*:\s*\['


def decode_byte_arrays(json_arrays: pl.Series) -> pl.Series:
    """Decode JSON byte arrays (``"[104,105]"``) to text, invalid UTF-8 replaced.

    All arrays are joined with NUL separators into one buffer, decoded once and split
    again; NUL bytes inside a message (never meaningful in a log line) are replaced first
    so the split is exact.
    """
    lists = json_arrays.str.json_decode(pl.List(pl.UInt8))
    lengths = lists.list.len().fill_null(0).to_numpy().astype(np.int64)
    values = lists.explode().drop_nulls().to_numpy().astype(np.uint8)
    values[values == 0] = 0xFF
    starts = np.cumsum(lengths) - lengths
    joined = np.insert(values, starts[1:], 0) if len(lengths) > 1 else values
    texts = joined.tobytes().decode("utf-8", errors="replace").split("\x00")
    return pl.Series(json_arrays.name, texts, dtype=pl.String)


def parse(lines: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Parse ``journalctl -o json`` lines (see the module docstring)."""
    line = pl.col("line")

    def field(name: str) -> pl.Expr:
        return line.str.json_path_match(f"$.{name}")

    is_object = line.str.contains(r"^\s*\{")
    frame = lines.with_columns(
        pl.when(is_object).then(field("__REALTIME_TIMESTAMP")).alias("_rt"),
        pl.when(is_object).then(field("MESSAGE")).alias("_msg"),
        pl.when(is_object).then(short_host(field("_HOSTNAME"))).alias("node"),
        pl.when(is_object).then(pl.coalesce(field("SYSLOG_IDENTIFIER"), field("_COMM"))).alias("program"),
        line.str.contains(BYTE_ARRAY_MESSAGE).alias("_bytes"),
    )
    if frame["_bytes"].any():
        arrays = frame.filter(pl.col("_bytes"))
        decoded = arrays.select("file", "seq", decode_byte_arrays(arrays["_msg"]).alias("_decoded"))
        frame = frame.join(decoded, on=["file", "seq"], how="left", maintain_order="left").with_columns(
            pl.coalesce("_decoded", "_msg").alias("_msg")
        )
    ts = pl.col("_rt").cast(pl.Int64, strict=False).cast(TS_DTYPE)
    reason = (
        pl.when(pl.col("_rt").is_null() & pl.col("_msg").is_null())
        .then(pl.lit("not a journald JSON object (journalctl -o json writes one per line)"))
        .when(ts.is_null()).then(pl.lit("missing or non-numeric __REALTIME_TIMESTAMP"))
        .when(pl.col("_msg").is_null()).then(pl.lit("no MESSAGE field"))
    )
    return frame.select(
        "file",
        "seq",
        ts.alias("ts"),
        pl.when(ts.is_not_null()).then(pl.lit("line")).alias("ts_kind"),
        "node",
        pl.lit(None, dtype=pl.Int32).alias("rank"),
        "program",
        pl.col("_msg").fill_null(line).alias("message"),
        reason.cast(pl.String).alias("reason"),
    )
