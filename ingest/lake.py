"""The lake: hive-partitioned Parquet (zstd) on a local or shared filesystem.

This module is the only code that writes lake tables. Layout (ARCHITECTURE §2)::

    <lake>/<table>/cluster=<c>/day=<YYYY-MM-DD>[/source=<s>]/part-<key>.parquet
    <lake>/topology/cluster=<c>/part-<key>.parquet
    <lake>/runs/<run_id>.json

Three landing modes, chosen per table, make every write idempotent:

* ``by_input`` (observations, metrics, rejects): rows belong to an input (``input_id``: a
  file path, a Loki stream window, an API URL). :meth:`Lake.land_inputs` lands a batch of
  inputs at once: one file per (batch, partition) named by a hash of the batch's sorted
  input ids, so landing the same batch again rewrites the same files. Landing an input
  again, alone or in another batch, replaces its rows wherever they were (see "Input
  index" below); landing is idempotent and never duplicates rows.
* ``upsert`` (attempts, topology): rows are keyed (``attempt_id``; the topology key); a new
  row replaces the stored row with the same key wherever it lives in the cluster. Attempts
  are merged rather than replaced (:data:`UPSERT_MERGE`): a later report never erases what
  an earlier one knew and no longer sees.
* ``replace`` (events, results): the engine hands over the full content of a set of
  ``(cluster, day)`` partitions, which replaces them wholesale (a rerun never appends).

Every file is written to a hidden temporary name in its final directory, fsynced, then
renamed into place, so a reader (or a process killed mid-write) never sees a partial file.
Readers only look at ``*.parquet`` names, which temporary files never have. The temporary
files a killed process left are deleted before the next write through a :class:`Lake`.

Input index (``by_input`` tables). ``_inputs/<table>/cluster=<c>/index.parquet`` has one
row per (``input_id``, ``file``) saying "this input may have rows in this file" (paths
relative to the lake root), so a re-landing finds what it must replace without listing the
table. Landing a batch runs these steps, each file write atomic:

1. write a journal ``pending-<batch key>.parquet`` beside the index: the batch's inputs ×
   the files this landing is about to write;
2. write the batch's data files (one per partition);
3. rewrite every other file the index names for the batch's inputs without their rows
   (delete a file left empty);
4. rewrite the index (the batch's inputs now point at the new files only; files deleted in
   step 3 are dropped) and delete the journals it has absorbed.

The index is always read together with any journals left beside it, and a landing absorbs
them into the index it writes. What a crash leaves behind (never a partial file):

* before step 2: a journal naming files that may not exist (harmless);
* during step 2 or 3: some inputs of the batch in both their old and their new files
  (duplicated, never lost). The index names the old files and the journal the new ones,
  and both stay known until the input is landed again: landing it again, alone or in any
  batch (re-running the same ingest is the usual repair), leaves it exactly once;
* during step 4: a journal the next landing absorbs (the data is already right).

Derivatives (``by_input`` tables). A :class:`Derivation` handed to the lake computes rows
from each data file as it is written — the engine's extraction, so a run reads the events
of the lines instead of the lines — and the lake writes them to
``_derived/<name>/<data file's path>``. A derivative is written after its data file and
deleted before that file is rewritten or deleted, so one that exists always describes
the file's current rows; one that is missing (a crash in between, a landing without the
derivation, another rule pack) only means the reader derives from the file itself, and
:meth:`Lake.derive_missing` writes it then (what an attribution run does, so that only
the first run after a rule-pack change pays for extraction). ``_derived/`` is a cache:
deleting it loses nothing.

There is one writer per lake at a time (no locking).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.hostlist import short_host
from ingest.schema import CLUSTER_NAME, LATER_COLUMNS, PARTITIONS, TABLES, with_later_columns
from ingest.states import merge_attempts

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
    "topology": ("kind", "node", "hca", "port", "gpu", "alias"),
}

UPSERT_MERGE: dict[str, Callable[[pl.DataFrame, pl.DataFrame], pl.DataFrame]] = {
    "attempts": merge_attempts,
}
"""How a landed row combines with the stored row of its key (the tables not named here
replace it): ``merge(new rows, stored rows of their keys)``."""

MODE = {
    "observations": "by_input",
    "metrics": "by_input",
    "rejects": "by_input",
    "attempts": "upsert",
    "topology": "upsert",
    "events": "replace",
    "results": "replace",
}

WRITE_THREADS = 2
"""Partition files a derived-table replace writes at once."""

PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 3}

FREE_TEXT = frozenset({"message", "origin", "raw", "event_id", "params", "labels", "evidence", "alternatives"})
"""Columns of (nearly) unique text: written without a dictionary and without min/max
statistics. Both would cost a hash and a comparison of every value (a third of writing
observations) for nothing: the dictionary overflows at once, and no reader prunes files by
a log line's text."""


class LakeError(Exception):
    """A lake operation failed; the message names the table and path concerned."""


@dataclass(frozen=True)
class LandReport:
    """What one landing call wrote: rows per table and the partition files touched."""

    table: str
    rows: int
    files: tuple[str, ...]


def batch_key(input_ids: Iterable[str]) -> str:
    """Stable file-name key for a set of inputs (a short hash of their sorted ids)."""
    return hashlib.sha1("\n".join(sorted(input_ids)).encode()).hexdigest()[:16]


INDEX_SCHEMA = {"input_id": pl.String, "file": pl.String}

DERIVED = "_derived"
"""Folder of the lake that holds the derivatives of data files (see the module docstring)."""


@dataclass(frozen=True)
class Derivation:
    """Rows computed from each data file of a ``by_input`` table when the lake writes it
    (an extension point: the ingest layer never imports the engine, so whoever opens the
    lake for landing hands the engine's derivations in).

    ``name`` names its folder under ``_derived/``; it must change whenever what ``derive``
    computes changes (put a digest of its definition in it), since derivatives of another
    name are never read. ``derive`` gets the rows of one landing (several data files of one
    cluster and source) with their partition columns (``cluster``, ``day``, ``source``)
    and returns a frame of any schema that keeps ``day``: each data file's derivative holds
    the derived rows of its day. :meth:`Lake.read_derived` also calls it, with a lazy frame
    over the data files that have no derivative.
    """

    name: str
    table: str
    derive: Callable[[pl.DataFrame | pl.LazyFrame], pl.DataFrame] = field(compare=False)


TEMPORARY = re.compile(r"\..+\.(?:parquet|json)\.[a-z0-9_]{8}\.tmp")
"""The name of a temporary file of :func:`_atomic_write_bytes` (``tempfile.mkstemp`` puts
eight random characters between the prefix and the suffix); no data file has such a name."""


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

    def __init__(self, root: str | os.PathLike[str], derivations: Sequence[Derivation] = ()):
        self.root = Path(root)
        self.derivations = tuple(derivations)
        self._swept = False
        self._sweep_lock = threading.Lock()
        self._aliases: dict[str, pl.DataFrame] = {}

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
        if mode == "by_input":
            if not input_id:
                raise LakeError(f"{table}: landing needs an input_id")
            # The argument says which input the rows belong to (their column may be unset).
            rows = data.with_columns(pl.lit(input_id, dtype=pl.String).alias("input_id"))
            return self.land_inputs(table, rows, cluster=cluster, source=source, input_ids=[input_id])
        return self._upsert(table, self._conform(table, data, cluster), cluster)

    def land_inputs(
        self,
        table: str,
        data: pl.DataFrame,
        *,
        cluster: str,
        source: str | None = None,
        input_ids: Iterable[str] | None = None,
    ) -> LandReport:
        """Land the rows of a batch of inputs of a ``by_input`` table in one write.

        ``data`` has the table's columns; its ``input_id`` column says which input each row
        belongs to. ``input_ids`` is the batch's set of inputs (default: those in
        ``data``); list inputs that now have no rows too, so that their old rows go. After
        the call every input of the batch has exactly its rows of ``data`` in the table,
        wherever its earlier rows were (idempotent; see the module docstring for the steps
        and what a crash leaves). Rows are split into day partitions (:data:`DAY_FROM`),
        one file per partition named by :func:`batch_key`. Raises :class:`LakeError`, with
        nothing written, when columns are missing or mistyped, a row has no input or no
        timestamp, or a row's input is not in ``input_ids``.
        """
        if MODE[table] != "by_input":
            raise LakeError(f"{table}: not a by-input table; use land() (upsert) or replace_partitions()")
        if "source" in PARTITIONS[table] and not source:
            raise LakeError(f"{table}: landing needs a source")
        frame = self._by_node_name(self._conform(table, data, cluster), cluster).with_columns(self._day_expr(table))
        if frame["input_id"].null_count():
            raise LakeError(f"{table}: {frame['input_id'].null_count()} rows have no input_id; set it to the input they came from")
        given = frame["input_id"].unique()
        inputs = sorted(set(input_ids)) if input_ids is not None else sorted(given.to_list())
        outside = given.filter(~given.is_in(pl.Series(inputs, dtype=pl.String).implode()))
        if outside.len():
            raise LakeError(f"{table}: rows of inputs outside the batch, e.g. {outside[0]}; add them to input_ids")
        if frame["day"].null_count():
            bad = frame.filter(pl.col("day").is_null())["input_id"][0]
            raise LakeError(f"{table}: {frame['day'].null_count()} rows (e.g. of {bad}) have no timestamp")
        if not inputs:
            return LandReport(table, 0, ())
        return self._land_batch(table, frame, cluster, source, inputs)

    def replace_partitions(
        self, table: str, data: pl.DataFrame, *, cluster: str, days: Iterable[date]
    ) -> LandReport:
        """Replace the ``(cluster, day)`` partitions of a derived table wholesale.

        Every day in ``days`` ends up holding exactly the rows of ``data`` that fall on it
        (possibly none). Rows outside ``days`` are an error: they would be silently lost.
        """
        if MODE[table] != "replace":
            raise LakeError(f"{table}: not a derived table")
        frame = self._conform(table, data, cluster).with_columns(self._day_expr(table))
        days = set(days)
        outside = set(frame["day"].unique().to_list()) - days
        if outside:
            raise LakeError(f"{table}: rows fall on days outside the replaced set: {sorted(outside)}")
        by_day = frame.partition_by("day", as_dict=True)
        empty = frame.head(0)
        parts = [
            (by_day.get((day,), empty).drop("day"), _partition_dir(self.root, table, {"cluster": cluster, "day": day}))
            for day in sorted(days)
        ]
        writes = [(part, table, pdir / "part-0.parquet") for part, pdir in parts if part.height]
        # Parquet encoding runs on one core per file and releases the GIL: days in parallel.
        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            list(pool.map(lambda job: self._write(*job), writes))
        for part, pdir in parts:
            for stale in pdir.glob("*.parquet") if pdir.exists() else ():
                if stale.name != "part-0.parquet" or not part.height:
                    stale.unlink()
        return LandReport(table, frame.height, tuple(str(target) for _, _, target in writes))

    def write_manifest(self, run_id: str, manifest: dict) -> Path:
        """Write ``runs/<run_id>.json`` atomically."""
        path = self.root / "runs" / f"{run_id}.json"
        body = json.dumps(manifest, indent=2, sort_keys=True, default=str).encode()
        self._remove_stale_temporaries()
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
        """The Parquet files of ``table`` in the selected partitions, in a stable order.

        Walks only the selected partition folders, level by level (a lake holds thousands
        of files and a run asks for one day at a time), never the whole table.
        """
        base = self.root / table
        if not base.exists():
            return []
        wanted = {
            "cluster": set(clusters) if clusters is not None else None,
            "day": {d.isoformat() for d in days} if days is not None else None,
            "source": set(sources) if sources is not None else None,
        }
        folders = [str(base)]
        for key in PARTITIONS[table]:
            prefix = f"{key}="
            folders = [
                entry.path for folder in folders for entry in _sorted_entries(folder)
                if entry.is_dir() and entry.name.startswith(prefix)
                and (wanted[key] is None or entry.name[len(prefix):] in wanted[key])
            ]
        return [
            Path(entry.path) for folder in folders for entry in _sorted_entries(folder)
            if entry.is_file() and entry.name.endswith(".parquet") and not entry.name.startswith(".")
        ]

    def days(self, table: str, *, clusters: Sequence[str] | None = None) -> list[date]:
        """The days ``table`` has files on (of ``clusters``), in order, from its folder names
        alone: how far a table reaches, without reading it."""
        files = self.files(table, clusters=clusters)
        return sorted({_partition_values(path.relative_to(self.root).as_posix())["day"] for path in files})

    def landed_at(
        self, table: str, *, clusters: Sequence[str] | None = None, days: Sequence[date] | None = None,
    ) -> pl.DataFrame:
        """``cluster``, ``day`` and ``landed`` of each data file of ``table`` in the selected
        partitions: when its rows were written (every file is written whole and renamed into
        place, so its modification time says it)."""
        rows = [
            (values["cluster"], values["day"], datetime.fromtimestamp(path.stat().st_mtime, UTC))
            for path in self.files(table, clusters=clusters, days=days)
            for values in [_partition_values(path.relative_to(self.root).as_posix())]
        ]
        return pl.DataFrame(rows, schema={"cluster": pl.String, "day": pl.Date, "landed": pl.Datetime("us", "UTC")},
                            orient="row")

    def scan(
        self,
        table: str,
        *,
        clusters: Sequence[str] | None = None,
        days: Sequence[date] | None = None,
        sources: Sequence[str] | None = None,
    ) -> pl.LazyFrame:
        """A lazy frame over ``table`` with its partition columns, empty if nothing landed."""
        return self.scan_files(table, self.files(table, clusters=clusters, days=days, sources=sources))

    def scan_files(self, table: str, files: Sequence[Path]) -> pl.LazyFrame:
        """A lazy frame over some of the files of ``table`` (from :meth:`files`), with its
        partition columns."""
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
            # A file written before a column was added to its table (LATER_COLUMNS) lacks it.
            missing_columns="insert",
        )

    def derived(self, name: str, files: Sequence[Path]) -> list[Path | None]:
        """For each data file of :meth:`files`, its derivative of :class:`Derivation`
        ``name`` (None when there is none: derive from the file itself)."""
        found = []
        for path in files:
            derivative = self.root / DERIVED / name / Path(path).relative_to(self.root)
            found.append(derivative if derivative.exists() else None)
        return found

    def derive_missing(self, derivation: Derivation, files: Sequence[Path]) -> int:
        """Write the derivative of each data file of ``files`` (from :meth:`files`) that has
        none, derived from the file itself; returns how many were written. One file at a
        time: a derivative holds exactly its own file's rows."""
        written = 0
        for path, found in zip(files, self.derived(derivation.name, files), strict=True):
            if found is None:
                rows = derivation.derive(self.scan_files(derivation.table, [path]))
                self._write_derived(Path(path).relative_to(self.root).as_posix(), [(derivation.name, rows)])
                written += 1
        return written

    def read_derived(self, derivation: Derivation, files: Sequence[Path]) -> pl.DataFrame:
        """The rows of ``derivation`` for the data ``files`` (from :meth:`files`): their
        derivatives where those exist, derived from the files themselves otherwise — the
        same rows either way (``day`` dropped, as in a derivative)."""
        found = self.derived(derivation.name, files)
        landed = [path for path in found if path is not None]
        rest = [path for path, derived in zip(files, found, strict=True) if derived is None]
        parts = [pl.read_parquet(landed)] if landed else []
        if rest or not parts:
            parts.append(derivation.derive(self.scan_files(derivation.table, rest)).drop("day"))
        return pl.concat(parts, how="vertical_relaxed")

    def manifests(self) -> list[dict]:
        """Every run manifest, oldest first."""
        runs = self.root / "runs"
        if not runs.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]

    # ---------------------------------------------------------------- internals

    def _conform(self, table: str, data: pl.DataFrame, cluster: str) -> pl.DataFrame:
        """Select and cast ``data`` to the table schema, or say precisely what is wrong
        (``cluster``, which names the partition folder, included).

        Node names (``node``, ``nodes``) are kept short and in lower case
        (:func:`ingest.hostlist.short_host`): host names are case-insensitive, one cluster's
        Slurm says ``Orion-01-01`` where its syslog says ``orion-01-01``, and Kubernetes
        names an EKS node ``ip-10-42-40-222.us-east-2.compute.internal`` where its journal
        says ``ip-10-42-40-222``."""
        named = [cluster, *(data["cluster"].unique().to_list() if "cluster" in data.columns else ())]
        bad = [c for c in named if c is None or not CLUSTER_NAME.match(c)]
        if bad:
            raise LakeError(f"{table}: cluster name {bad[0]!r} is not allowed: use letters, digits, '.', '_' and '-' "
                            "(it names a partition folder)")
        schema = pl.from_arrow(TABLES[table].empty_table()).schema
        missing = [c for c in schema if c not in data.columns and c not in LATER_COLUMNS.get(table, ())]
        if missing:
            raise LakeError(f"{table}: missing columns {missing}")
        try:
            frame = with_later_columns(data, table).select([pl.col(c).cast(t, strict=True) for c, t in schema.items()])
        except pl.exceptions.PolarsError as exc:
            raise LakeError(f"{table}: column types do not fit the schema: {exc}") from exc
        lower = [short_host(pl.col("node"))] if schema.get("node") == pl.String else []
        if schema.get("nodes") == pl.List(pl.String):
            lower.append(pl.col("nodes").list.eval(short_host(pl.element())))
        return frame.with_columns(lower) if lower else frame

    def _by_node_name(self, frame: pl.DataFrame, cluster: str) -> pl.DataFrame:
        """``frame`` with each ``node`` the cluster's topology lists as an alias
        (``node_alias`` rows: an old hostname, a Cray xname a node's logs use) replaced by
        the scheduler's name for that node, so its lines attach to the jobs that ran there.
        Read once per cluster and lake object (landing topology reads it again)."""
        if "node" not in frame.columns:
            return frame
        if cluster not in self._aliases:
            self._aliases[cluster] = self.scan("topology", clusters=[cluster]).filter(
                pl.col("kind") == "node_alias").select("alias", "node").collect()
        aliases = self._aliases[cluster]
        if aliases.is_empty():
            return frame
        return frame.with_columns(pl.col("node").replace(aliases["alias"], aliases["node"]))

    def _day_expr(self, table: str) -> pl.Expr:
        cols = [pl.col(c) for c in DAY_FROM[table]]
        return pl.coalesce(cols).dt.convert_time_zone("UTC").dt.date().alias("day")

    def _write(self, frame: pl.DataFrame, table: str, target: Path) -> None:
        # Polars' default string views must be copied into Arrow strings; its large strings
        # only need their offsets narrowed (the same table, about three times cheaper).
        arrow = frame.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(TABLES[table])
        self._write_parquet(arrow, target)

    def _write_parquet(self, arrow: pa.Table, path: Path) -> None:
        """Write ``arrow`` to ``path`` as the lake's Parquet, atomically."""
        self._remove_stale_temporaries()
        keyed = [name for name in arrow.schema.names if name not in FREE_TEXT]
        _atomic_write_bytes(path, lambda fh: pq.write_table(
            arrow, fh, **PARQUET_OPTIONS, use_dictionary=keyed, write_statistics=keyed,
        ))

    def _remove_stale_temporaries(self) -> None:
        """Before the first write through this object, delete every :data:`TEMPORARY` file
        under the lake: what writes killed mid-way left. A lake has one writer at a time, so
        none of them is a live write's. Every write calls this first, under a lock: a
        write from another thread of the writer (a run's reading threads write
        derivatives) waits for the sweep instead of losing its own temporary file to it."""
        with self._sweep_lock:
            if self._swept:
                return
            for folder, _, names in os.walk(self.root):
                for name in names:
                    if TEMPORARY.fullmatch(name):
                        Path(folder, name).unlink(missing_ok=True)
            self._swept = True

    def _drop_derived(self, rel: str) -> None:
        """Delete every derivative of data file ``rel`` (before the file changes)."""
        folder = self.root / DERIVED
        if folder.exists():
            for entry in _sorted_entries(str(folder)):
                (Path(entry.path) / rel).unlink(missing_ok=True)

    def _derive(self, table: str, frame: pl.DataFrame, values: dict[str, object]) -> list[tuple[str, pl.DataFrame]]:
        """``(name, rows)`` of each derivation of ``table`` over ``frame`` (rows of one or
        more data files of one cluster and source, with ``values`` the partition values
        the rows do not carry): one call per landing, not per file, since a derivation's
        fixed cost is far above its per-row cost."""
        rows = frame.with_columns(pl.lit(value).alias(key) for key, value in values.items())
        return [(d.name, d.derive(rows)) for d in self.derivations if d.table == table]

    def _write_derived(self, rel: str, derived: list[tuple[str, pl.DataFrame]]) -> None:
        """Write the derivatives of data file ``rel`` (after the file is written): the rows
        of its day, possibly none (an empty derivative still says the file was derived)."""
        day = _partition_values(rel)["day"]
        for name, rows in derived:
            part = rows.filter(pl.col("day") == day).drop("day")
            self._write_parquet(part.to_arrow(compat_level=pl.CompatLevel.oldest()), self.root / DERIVED / name / rel)

    def _index_dir(self, table: str, cluster: str) -> Path:
        return self.root / "_inputs" / table / f"cluster={cluster}"

    def _read_index(self, table: str, cluster: str) -> tuple[pl.DataFrame, list[Path]]:
        """The input index of ``(table, cluster)`` merged with any journals beside it, and
        the journal files read."""
        folder = self._index_dir(table, cluster)
        journals = sorted(folder.glob("pending-*.parquet")) if folder.exists() else []
        parts = [pl.read_parquet(p) for p in [folder / "index.parquet", *journals] if p.exists()]
        if not parts:
            return pl.DataFrame(schema=INDEX_SCHEMA), journals
        return pl.concat(parts).unique(maintain_order=True), journals

    def _write_index(self, frame: pl.DataFrame, path: Path) -> None:
        arrow = frame.select(list(INDEX_SCHEMA)).to_arrow()
        self._write_parquet(arrow, path)

    def _land_batch(
        self, table: str, frame: pl.DataFrame, cluster: str, source: str | None, inputs: list[str]
    ) -> LandReport:
        key = batch_key(inputs)
        ids = pl.Series("input_id", inputs, dtype=pl.String)
        targets: dict[str, pl.DataFrame] = {}
        # Partitions in day order, each with its rows in landing order: sorting the (few) days
        # spares sorting every row.
        parts = frame.partition_by("day", as_dict=True, maintain_order=True)
        for (day,), part in sorted(parts.items(), key=lambda item: item[0]):
            values = {"cluster": cluster, "day": day, "source": source}
            rel = (_partition_dir(self.root, table, values) / f"part-{key}.parquet").relative_to(self.root)
            targets[rel.as_posix()] = part.drop("day")
        owners = pl.concat(
            [part.select(pl.col("input_id").unique(), pl.lit(rel).alias("file")) for rel, part in targets.items()]
        ) if targets else pl.DataFrame(schema=INDEX_SCHEMA)
        index, journals = self._read_index(table, cluster)
        previous = set(index.filter(pl.col("input_id").is_in(ids.implode()))["file"].unique().to_list()) - set(targets)
        if not targets and not previous:
            return LandReport(table, 0, ())
        # Derived before anything is written: a derivation that fails lands nothing.
        fixed = {k: v for k, v in (("cluster", cluster), ("source", source)) if k in PARTITIONS[table]}
        derived = self._derive(table, frame, fixed) if targets else []
        folder = self._index_dir(table, cluster)
        journal = folder / f"pending-{key}.parquet"
        # 1. Record where the batch is about to land before any data file exists.
        if targets:
            self._write_index(ids.to_frame().join(pl.DataFrame({"file": list(targets)}), how="cross"), journal)
        # 2. The batch's own files (a derivative goes before its file changes and comes
        #    back after it is written).
        for rel, part in targets.items():
            self._drop_derived(rel)
            self._write(part, table, self.root / rel)
            self._write_derived(rel, derived)
        # 3. Take the batch's inputs out of every other file that held them.
        emptied = []
        for rel in sorted(previous):
            path = self.root / rel
            if not path.exists():
                continue
            kept = pl.read_parquet(path).filter(~pl.col("input_id").is_in(ids.implode()))
            self._drop_derived(rel)
            if kept.height:
                self._write(kept, table, path)
                self._write_derived(rel, self._derive(table, kept, _partition_values(rel)))
            else:
                path.unlink()
                emptied.append(rel)
        # 4. The index now says exactly where the batch's inputs are.
        index = pl.concat([
            index.filter(~pl.col("input_id").is_in(ids.implode()) & ~pl.col("file").is_in(pl.Series(emptied, dtype=pl.String).implode())),
            owners,
        ])
        self._write_index(index, folder / "index.parquet")
        for done in {*journals, journal}:
            done.unlink(missing_ok=True)
        return LandReport(table, frame.height, tuple(str(self.root / rel) for rel in targets))

    def _upsert(self, table: str, frame: pl.DataFrame, cluster: str) -> LandReport:
        if table == "topology":
            self._aliases.pop(cluster, None)
        keys = list(UPSERT_KEYS[table])
        if frame.select(keys).is_duplicated().any():
            raise LakeError(f"{table}: the landed rows repeat a key {keys}")
        merge = UPSERT_MERGE.get(table)
        new_keys = frame.select(keys)
        # One file at a time: only the partitions a landed key leaves, and the stored rows
        # of the landed keys (for ``merge``), stay in memory.
        touched: dict[Path, pl.DataFrame] = {}
        known: list[pl.DataFrame] = []
        for path in self.files(table, clusters=[cluster]):
            old = with_later_columns(pl.read_parquet(path), table)
            kept = old.join(new_keys, on=keys, how="anti", nulls_equal=True)
            if kept.height != old.height:
                touched[path.parent] = kept
                if merge is not None:
                    known.append(old.join(new_keys, on=keys, how="semi", nulls_equal=True))
        if known:
            # Merged before the day is placed: what the stored row knew may move the row.
            frame = merge(frame, pl.concat(known))
        if "day" in PARTITIONS[table]:
            frame = frame.with_columns(self._day_expr(table))
            if frame["day"].null_count():
                raise LakeError(f"{table}: rows without any timestamp cannot be placed in a day")
        else:
            frame = frame.with_columns(pl.lit(None, dtype=pl.Date).alias("day"))
        for (day,), part in frame.partition_by("day", as_dict=True, maintain_order=True).items():
            pdir = _partition_dir(self.root, table, {"cluster": cluster, "day": day})
            existing = touched.pop(pdir, None)
            if existing is None:
                existing = pl.concat([with_later_columns(pl.read_parquet(p), table)
                                      for p in sorted(pdir.glob("*.parquet"))]) \
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


def _partition_values(rel: str) -> dict[str, object]:
    """The partition values a data file's path names (``day`` as a date)."""
    values: dict[str, object] = dict(part.split("=", 1) for part in Path(rel).parent.parts if "=" in part)
    if "day" in values:
        values["day"] = date.fromisoformat(str(values["day"]))
    return values


def _sorted_entries(folder: str) -> list[os.DirEntry]:
    """The entries of ``folder`` by name (none if it vanished meanwhile)."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda e: e.name)
    except FileNotFoundError:
        return []


def days_between(since: date, until: date) -> list[date]:
    """Every UTC day from ``since`` to ``until`` inclusive."""
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


def to_arrow_table(table: str, frame: pl.DataFrame) -> pa.Table:
    """Cast a frame to the Arrow schema of ``table`` (for export and tests)."""
    return frame.select(TABLES[table].names).to_arrow().cast(TABLES[table])
