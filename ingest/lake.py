"""The lake: hive-partitioned Parquet (zstd) on a local or shared filesystem.

This module is the only code that writes lake tables. Layout (ARCHITECTURE §2)::

    <lake>/<table>/cluster=<c>/day=<YYYY-MM-DD>[/source=<s>]/part-<key>.parquet
    <lake>/topology/cluster=<c>/part-<key>.parquet
    <lake>/runs/<run_id>.json

Three landing modes, chosen per table, make every write idempotent:

* ``by_input`` (observations, metrics, rejects): the file name is derived from the input's
  identity (``input_id``: a file path, a Loki stream window, an API URL). Landing the same
  input again rewrites exactly the same files, and any file of that input that the new
  landing no longer produces is removed (``_inputs/<table>/cluster=<c>/<key>.json`` records
  which files each input owns).
* ``upsert`` (attempts, topology): rows are keyed (``attempt_id``; the topology key); a new
  row replaces the stored row with the same key wherever it lives in the cluster.
* ``replace`` (events, results): the engine hands over the full content of a set of
  ``(cluster, day)`` partitions, which replaces them wholesale (a rerun never appends).

Every file is written to a hidden temporary name in its final directory, fsynced, then
renamed into place, so a reader (or a process killed mid-write) never sees a partial file.
Readers only look at ``*.parquet`` names, which temporary files never have.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.schema import PARTITIONS, TABLES

DAY_FROM = {
    "attempts": ("end_ts", "start_ts", "submit_ts"),
    "observations": ("ts",),
    "metrics": ("ts",),
    "events": ("ts",),
    "results": ("end_ts", "start_ts", "run_ts"),
    "rejects": ("ts_ingest",),
}
"""Which timestamp (first non-null) decides a row's UTC ``day`` partition, per table."""

UPSERT_KEYS = {
    "attempts": ("attempt_id",),
    "topology": ("kind", "node", "hca", "port", "gpu"),
}

MODE = {
    "observations": "by_input",
    "metrics": "by_input",
    "rejects": "by_input",
    "attempts": "upsert",
    "topology": "upsert",
    "events": "replace",
    "results": "replace",
}

PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3}


class LakeError(Exception):
    """A lake operation failed; the message names the table and path concerned."""


@dataclass(frozen=True)
class LandReport:
    """What one landing call wrote: rows per table and the partition files touched."""

    table: str
    rows: int
    files: tuple[str, ...]


def input_key(input_id: str) -> str:
    """Stable file-name key for an input (a short hash of its identity)."""
    return hashlib.sha1(input_id.encode()).hexdigest()[:16]


def _atomic_write_bytes(path: Path, write) -> None:
    """Write via ``write(fileobj)`` to a hidden temp file beside ``path``, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _partition_dir(root: Path, table: str, values: dict[str, object]) -> Path:
    path = root / table
    for key in PARTITIONS[table]:
        value = values[key]
        if isinstance(value, date | datetime):
            value = value.strftime("%Y-%m-%d")
        path = path / f"{key}={value}"
    return path


class Lake:
    """A causelake lake rooted at a directory.

    All writes go through :meth:`land`, :meth:`replace_partitions` and
    :meth:`write_manifest`; reads through :meth:`scan`.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    # ---------------------------------------------------------------- writing

    def land(
        self,
        table: str,
        data: pl.DataFrame,
        *,
        cluster: str,
        input_id: str | None = None,
        source: str | None = None,
    ) -> LandReport:
        """Land ``data`` (columns of the table's schema) for one input or one key set.

        ``by_input`` tables need ``input_id`` (and observations a ``source``); the rows are
        split into day partitions from :data:`DAY_FROM`. ``upsert`` tables replace rows by
        key. Raises :class:`LakeError` when columns are missing or of the wrong type; in that
        case nothing has been written.
        """
        mode = MODE[table]
        if mode == "replace":
            raise LakeError(f"{table}: derived table, write it with replace_partitions()")
        frame = self._conform(table, data)
        if mode == "by_input":
            if not input_id:
                raise LakeError(f"{table}: landing needs an input_id")
            if "source" in PARTITIONS[table] and not source:
                raise LakeError(f"{table}: landing needs a source")
            return self._land_by_input(table, frame, cluster, input_id, source)
        return self._upsert(table, frame, cluster)

    def replace_partitions(
        self, table: str, data: pl.DataFrame, *, cluster: str, days: Iterable[date]
    ) -> LandReport:
        """Replace the ``(cluster, day)`` partitions of a derived table wholesale.

        Every day in ``days`` ends up holding exactly the rows of ``data`` that fall on it
        (possibly none). Rows outside ``days`` are an error: they would be silently lost.
        """
        if MODE[table] != "replace":
            raise LakeError(f"{table}: not a derived table")
        frame = self._conform(table, data).with_columns(self._day_expr(table))
        days = set(days)
        outside = set(frame["day"].unique().to_list()) - days
        if outside:
            raise LakeError(f"{table}: rows fall on days outside the replaced set: {sorted(outside)}")
        files = []
        for day in sorted(days):
            part = frame.filter(pl.col("day") == day).drop("day")
            pdir = _partition_dir(self.root, table, {"cluster": cluster, "day": day})
            target = pdir / "part-0.parquet"
            if part.height:
                self._write(part, table, target)
                files.append(str(target))
            for stale in pdir.glob("*.parquet") if pdir.exists() else ():
                if stale != target or not part.height:
                    stale.unlink()
        return LandReport(table, frame.height, tuple(files))

    def write_manifest(self, run_id: str, manifest: dict) -> Path:
        """Write ``runs/<run_id>.json`` atomically."""
        path = self.root / "runs" / f"{run_id}.json"
        body = json.dumps(manifest, indent=2, sort_keys=True, default=str).encode()
        _atomic_write_bytes(path, lambda fh: fh.write(body))
        return path

    # ---------------------------------------------------------------- reading

    def files(
        self,
        table: str,
        *,
        clusters: Sequence[str] | None = None,
        days: Sequence[date] | None = None,
        sources: Sequence[str] | None = None,
    ) -> list[Path]:
        """The Parquet files of ``table`` in the selected partitions, in a stable order."""
        base = self.root / table
        if not base.exists():
            return []
        wanted = {
            "cluster": set(clusters) if clusters is not None else None,
            "day": {d.isoformat() for d in days} if days is not None else None,
            "source": set(sources) if sources is not None else None,
        }
        out = []
        for path in sorted(base.rglob("*.parquet")):
            if path.name.startswith("."):
                continue
            parts = dict(
                p.split("=", 1) for p in path.relative_to(base).parts[:-1] if "=" in p
            )
            if all(wanted[k] is None or parts.get(k) in wanted[k] for k in parts if k in wanted):
                out.append(path)
        return out

    def scan(
        self,
        table: str,
        *,
        clusters: Sequence[str] | None = None,
        days: Sequence[date] | None = None,
        sources: Sequence[str] | None = None,
    ) -> pl.LazyFrame:
        """A lazy frame over ``table`` with its partition columns, empty if nothing landed."""
        files = self.files(table, clusters=clusters, days=days, sources=sources)
        hive = {k: (pl.Date if k == "day" else pl.String) for k in PARTITIONS[table]}
        if not files:
            empty = pl.from_arrow(TABLES[table].empty_table())
            return empty.with_columns(
                [pl.lit(None, dtype=t).alias(k) for k, t in hive.items()]
            ).lazy()
        return pl.scan_parquet(
            [str(f) for f in files],
            hive_partitioning=True,
            hive_schema=hive,
            schema=pl.from_arrow(TABLES[table].empty_table()).schema,
        )

    def manifests(self) -> list[dict]:
        """Every run manifest, oldest first."""
        runs = self.root / "runs"
        if not runs.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]

    # ---------------------------------------------------------------- internals

    def _conform(self, table: str, data: pl.DataFrame) -> pl.DataFrame:
        """Select and cast ``data`` to the table schema, or say precisely what is wrong."""
        schema = pl.from_arrow(TABLES[table].empty_table()).schema
        missing = [c for c in schema if c not in data.columns]
        if missing:
            raise LakeError(f"{table}: missing columns {missing}")
        try:
            return data.select([pl.col(c).cast(t, strict=True) for c, t in schema.items()])
        except pl.exceptions.PolarsError as exc:
            raise LakeError(f"{table}: column types do not fit the schema: {exc}") from exc

    def _day_expr(self, table: str) -> pl.Expr:
        cols = [pl.col(c) for c in DAY_FROM[table]]
        return pl.coalesce(cols).dt.convert_time_zone("UTC").dt.date().alias("day")

    def _write(self, frame: pl.DataFrame, table: str, target: Path) -> None:
        arrow = frame.to_arrow().cast(TABLES[table])
        _atomic_write_bytes(target, lambda fh: pq.write_table(arrow, fh, **PARQUET_OPTIONS))

    def _land_by_input(
        self, table: str, frame: pl.DataFrame, cluster: str, input_id: str, source: str | None
    ) -> LandReport:
        key = input_key(input_id)
        name = f"part-{key}.parquet"
        frame = frame.with_columns(self._day_expr(table))
        if frame["day"].null_count():
            raise LakeError(f"{table}: {frame['day'].null_count()} rows of {input_id} have no timestamp")
        index = self.root / "_inputs" / table / f"cluster={cluster}" / f"{key}.json"
        previous = {self.root / p for p in json.loads(index.read_text())["files"]} if index.exists() else set()
        written = []
        for (day,), part in frame.sort("day").partition_by("day", as_dict=True, maintain_order=True).items():
            values = {"cluster": cluster, "day": day, "source": source}
            target = _partition_dir(self.root, table, values) / name
            self._write(part.drop("day"), table, target)
            written.append(target)
        # The index says which files this input owns, so a re-landing finds what it must
        # replace without listing the whole table (millions of job outputs make that slow).
        body = json.dumps({"input_id": input_id, "files": sorted(str(p.relative_to(self.root)) for p in written)})
        if written or index.exists():
            _atomic_write_bytes(index, lambda fh: fh.write(body.encode()))
        for stale in previous - set(written):
            stale.unlink(missing_ok=True)
        return LandReport(table, frame.height, tuple(str(p) for p in written))

    def _upsert(self, table: str, frame: pl.DataFrame, cluster: str) -> LandReport:
        keys = list(UPSERT_KEYS[table])
        if frame.select(keys).is_duplicated().any():
            raise LakeError(f"{table}: the landed rows repeat a key {keys}")
        if "day" in PARTITIONS[table]:
            frame = frame.with_columns(self._day_expr(table))
            if frame["day"].null_count():
                raise LakeError(f"{table}: rows without any timestamp cannot be placed in a day")
        else:
            frame = frame.with_columns(pl.lit(None, dtype=pl.Date).alias("day"))
        new_keys = frame.select(keys)
        touched: dict[Path, pl.DataFrame] = {}
        for path in self.files(table, clusters=[cluster]):
            old = pl.read_parquet(path)
            kept = old.join(new_keys, on=keys, how="anti", nulls_equal=True)
            if kept.height != old.height:
                touched[path.parent] = kept
        for (day,), part in frame.partition_by("day", as_dict=True, maintain_order=True).items():
            pdir = _partition_dir(self.root, table, {"cluster": cluster, "day": day})
            existing = touched.pop(pdir, None)
            if existing is None:
                existing = pl.concat([pl.read_parquet(p) for p in sorted(pdir.glob("*.parquet"))]) \
                    if pdir.exists() and any(pdir.glob("*.parquet")) else None
            merged = part.drop("day") if existing is None else pl.concat([existing, part.drop("day")])
            touched[pdir] = merged
        written = []
        for pdir, merged in touched.items():
            target = pdir / "part-0.parquet"
            if merged.height:
                self._write(merged.sort(keys, nulls_last=True), table, target)
                written.append(str(target))
            for stale in pdir.glob("*.parquet"):
                if stale != target or not merged.height:
                    stale.unlink()
        return LandReport(table, frame.height, tuple(written))


def days_between(since: date, until: date) -> list[date]:
    """Every UTC day from ``since`` to ``until`` inclusive."""
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


def to_arrow_table(table: str, frame: pl.DataFrame) -> pa.Table:
    """Cast a frame to the Arrow schema of ``table`` (for export and tests)."""
    return frame.select(TABLES[table].names).to_arrow().cast(TABLES[table])
