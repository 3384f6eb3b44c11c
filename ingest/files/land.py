"""Land log files: expand paths, read them in batches, tie lines to attempts, write through
the lake.

Files are read in batches bounded by :data:`BATCH_BYTES` of (decompressed) text. Each batch
is parsed with one run of each parser (:func:`ingest.files.read.parse_batch`), tied to
attempts with joins, and landed with one :meth:`ingest.lake.Lake.land_inputs` call per
source and table: a fleet's million job outputs become a few hundred Parquet files, not a
million, and Python only loops over files to read their bytes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

import polars as pl

from ingest.files.app import JOB_CANCELLED
from ingest.files.common import (
    PLACEMENT_COLUMNS, TS_DTYPE, ZONELESS, FileBatch, FilesError, ParseContext, check_timezone, lines_of, read_log_bytes,
)
from ingest.files.detect import check_source
from ingest.files.read import ParsedBatch, as_utc, parse_batch, untied_ranks
from ingest.hostlist import short_host
from ingest.lake import Lake
from ingest.schema import ATTEMPTS, HET_OFFSET, het_leader, processes_per_node

SLURM_OUTPUT = r"(?:^|/)slurm-(\d+(?:_\d+)?)\.(?:out|err)(?:\.gz)?$"
"""Slurm's default output names ``slurm-%j.out`` and ``slurm-%A_%a.out``, and their stderr
twins (``--error=slurm-%j.err``; group 1: the job id, ``1234`` or ``1234_7``), matched at
the end of a path."""

SLURM_NAME = re.compile(SLURM_OUTPUT)

BATCH_BYTES = 128 * 1024 * 1024
"""Text read per batch. Parsing holds a few copies of the batch's lines, so this bounds the
memory of a landing whatever the number of files (one larger file is its own batch)."""

FIRST_BATCH_BYTES = 16 * 1024 * 1024
"""Text read for a landing's first batch: landing starts once it is parsed, and the next
batch is parsed meanwhile; a full-size first batch would keep one core idle that long."""

ATTEMPT_FIELDS = ["attempt_id", "start_ts", "end_ts", "nodes", "ranks_per_node", "gpus_per_node"]
OUTLASTING = timedelta(hours=1)
"""How long after its attempt ended a stamped line of a job output may still be that
attempt's (the teardown, an epilogue); later lines were written by a run the lake does not
know yet (a requeue whose accounting lands the next night)."""


@dataclass(frozen=True)
class FileReport:
    """What happened to one file: lines read, observations landed, lines rejected,
    ``unplaced``: landed lines with neither a node nor an attempt, which no verdict can see
    (a ``dmesg`` capture landed without ``--node``), ``zoneless``: landed lines whose
    stamp carried no zone, read in the landing's time zone, and ``outlasting``: lines
    stamped more than :data:`OUTLASTING` after the attempt they were tied to ended (its job
    ran again, and that run's accounting is not in the lake yet), ``cut``: why the file's gzip
    data stopped short (its lines up to the damage landed; re-copy it), null when it did not."""

    path: str
    source: str
    attempt_ids: tuple[str, ...]
    read: int
    landed: int
    rejected: int
    unplaced: int = 0
    zoneless: int = 0
    outlasting: int = 0
    cut: str | None = None


REPORT_SCHEMA = {
    "path": pl.String, "source": pl.String, "attempt_ids": pl.List(pl.String), "read": pl.Int64,
    "landed": pl.Int64, "rejected": pl.Int64, "unplaced": pl.Int64, "zoneless": pl.Int64, "outlasting": pl.Int64,
    "cut": pl.String,
}
"""The columns of :attr:`FilesReport.table`, those of :class:`FileReport`."""


@dataclass
class FilesReport:
    """Per-file reports and totals of one :func:`land_log_files` call.

    ``table`` has one row per file, in path order, with the fields of :class:`FileReport`;
    ``files`` is the same as :class:`FileReport` objects, built on first use (a fleet lands a
    million job outputs in one call, and the totals need none of them)."""

    table: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REPORT_SCHEMA))

    @cached_property
    def files(self) -> list[FileReport]:
        """One :class:`FileReport` per file, in path order."""
        return _file_reports(self.table)

    def flagged(self) -> list[FileReport]:
        """The files a landing should warn about: every line rejected (landed as the wrong
        source), or lines that name no node and tie to no attempt."""
        return _file_reports(self.table.filter(
            ((pl.col("rejected") > 0) & (pl.col("landed") == 0)) | (pl.col("unplaced") > 0)))

    def outlasting_outputs(self) -> list[FileReport]:
        """The files with lines stamped well after the attempt they were tied to ended
        (``outlasting``): a later run of the job wrote them, and they belong to it once its
        accounting has landed and the file is landed again."""
        return _file_reports(self.table.filter(pl.col("outlasting") > 0))

    def cut_files(self) -> list[FileReport]:
        """The gzip files whose data stopped short (``cut``): only their lines before the
        damage landed, and landing a good copy again replaces them."""
        return _file_reports(self.table.filter(pl.col("cut").is_not_null()))

    def untied_outputs(self) -> list[FileReport]:
        """The Slurm output files (``slurm-%j.out`` names) whose lines landed tied to no
        attempt: their job was not in the lake yet (its accounting lands later)."""
        return _file_reports(self.table.filter(
            pl.col("path").str.contains(SLURM_OUTPUT) & (pl.col("attempt_ids").list.len() == 0)
            & (pl.col("landed") > 0)))

    @property
    def read(self) -> int:
        """Non-blank lines read over all files."""
        return int(self.table["read"].sum())

    @property
    def landed(self) -> int:
        """Observations landed over all files."""
        return int(self.table["landed"].sum())

    @property
    def rejected(self) -> int:
        """Lines sent to ``rejects`` over all files."""
        return int(self.table["rejected"].sum())

    @property
    def zoneless(self) -> int:
        """Landed lines whose stamp carried no zone, over all files."""
        return int(self.table["zoneless"].sum())


def _file_reports(table: pl.DataFrame) -> list[FileReport]:
    return [
        FileReport(path, source, tuple(ids or ()), *counts)
        for path, source, ids, *counts in table.select(list(REPORT_SCHEMA)).iter_rows()
    ]


def _files_under(folder: str, out: list[str]) -> None:
    """Append the files below ``folder`` (hidden entries skipped, directory symlinks not
    followed) to ``out``. ``scandir`` entries know their type without a ``stat`` per file."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                _files_under(entry.path, out)
            elif entry.is_file():
                out.append(os.path.realpath(entry.path) if entry.is_symlink() else entry.path)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``: files as given, directories recursed (sorted, hidden
    entries skipped), duplicates removed, all resolved. Raises :class:`FilesError` for a
    missing path or a directory without files, before anything is read."""
    return [Path(p) for p in resolved_files(paths)]


def resolved_files(paths: Iterable[str | Path]) -> list[str]:
    """:func:`expand_paths` as strings (a million ``Path`` objects cost seconds)."""
    out: dict[str, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            out[str(path.resolve())] = None
        elif path.is_dir():
            found: list[str] = []
            _files_under(str(path.resolve()), found)
            if not found:
                raise FilesError(f"{path}: directory holds no files; point at the log files or their folder")
            out.update(dict.fromkeys(sorted(found, key=lambda p: p.split(os.sep))))
        else:
            raise FilesError(f"{path}: no such file or directory; check the path")
    if not out:
        raise FilesError("no input paths given; pass at least one log file or folder")
    return list(out)


def checked_files(
    paths: Iterable[str | Path], *, source: str | None, node: str | None, node_pattern: str | None, timezone: str,
) -> list[str]:
    """The files of ``paths`` (:func:`resolved_files`) once the landing options are checked:
    ``source``, the node options (:func:`check_node_pattern`) and ``timezone``. Raises
    :class:`FilesError` before anything is read."""
    if source is not None:
        check_source(source)
    files = resolved_files(paths)
    check_node_pattern(files, node, node_pattern)
    check_timezone(timezone)
    return files


def check_node_pattern(files: list[str], node: str | None, node_pattern: str | None) -> None:
    """Raise :class:`FilesError` unless ``node_pattern`` (when given) is a valid regex
    with a group that finds a node in every path of ``files``, and ``node`` is not given
    with it."""
    if node_pattern is None:
        return
    if node is not None:
        raise FilesError("give either a node or a node pattern, not both")
    paths = pl.Series("path", files, dtype=pl.String)
    try:
        found = paths.str.extract(node_pattern, 1)
    except pl.exceptions.PolarsError as exc:
        raise FilesError(f"node pattern {node_pattern!r} is not a valid regex with a group: {exc}") from None
    missing = paths.filter(found.fill_null("") == "")
    if missing.len():
        more = f" and {missing.len() - 3} more" if missing.len() > 3 else ""
        raise FilesError(
            f"node pattern {node_pattern!r} finds no node (its first group) in {', '.join(missing.head(3))}{more}"
        )


def read_batches(files: list[str], budget: int, first: int | None = None) -> Iterator[FileBatch]:
    """Read ``files`` in order into batches of about ``budget`` bytes of text each (the
    first of about ``first`` bytes, when given and smaller)."""
    paths: list[str] = []
    raws: list[bytes] = []
    mtimes: list[int] = []
    cuts: list[str | None] = []
    size, limit = 0, min(first or budget, budget)
    for path in files:
        raw, mtime_us, cut = read_log_bytes(path)
        paths.append(path)
        raws.append(raw)
        mtimes.append(mtime_us)
        cuts.append(cut)
        size += len(raw)
        if size >= limit:
            yield lines_of(paths, raws, mtimes, cuts)
            paths, raws, mtimes, cuts, size, limit = [], [], [], [], 0, budget
    if paths:
        yield lines_of(paths, raws, mtimes, cuts)


def known_attempts(lake: Lake, cluster: str | None) -> pl.DataFrame:
    """The cluster's attempts, read once per landing call (not once per file or batch), with
    ``_leader`` (the job id a ``slurm-%j.out`` name gives: a heterogeneous job component's
    ``1234+1`` is ``1234``) and ``_het`` (the component's offset, null for other jobs).
    ``cluster`` None: no attempt (the lake is not read)."""
    frame = pl.from_arrow(ATTEMPTS.empty_table()).lazy() if cluster is None else lake.scan("attempts", clusters=[cluster])
    return frame.select(
        *ATTEMPT_FIELDS, "job_id", "attempt_index",
        het_leader(pl.col("job_id")).alias("_leader"),
        pl.col("job_id").str.extract(HET_OFFSET, 1).cast(pl.Int32).alias("_het"),
    ).collect()


def candidate_attempts(files: pl.DataFrame, attempts: pl.DataFrame, *, attempt_id: str | None) -> pl.DataFrame:
    """The attempts each file's lines may belong to: ``file``, :data:`ATTEMPT_FIELDS` and
    ``_k`` (the order of the attempt among the file's candidates, by start). ``attempts``
    as :func:`known_attempts` gives them.

    ``attempt_id`` wins for every file (a row with just the id when the lake does not know
    it). Otherwise a ``slurm-%j.out`` name selects every attempt of that job: a requeued
    job appends all its attempts to one output file, and :func:`tie_to_attempts` splits
    the lines by time. So does a heterogeneous job's leader id select every component
    (``1234+0``, ``1234+1``: their output is one file, named after the leader), ordered by
    offset, which :func:`tie_to_attempts` splits by the nodes the lines name. Files with no
    candidate are absent.
    """
    fields = attempts.select(ATTEMPT_FIELDS + ["attempt_index"])
    if attempt_id is not None:
        rows = fields.filter(pl.col("attempt_id") == attempt_id)
        if not rows.height:
            rows = pl.concat([rows, pl.DataFrame({"attempt_id": [attempt_id]})], how="diagonal_relaxed")
        cands = files.select("file").join(rows, how="cross").with_columns(pl.lit(None, dtype=pl.Int32).alias("_het"))
    else:
        jobs = files.select("file", pl.col("input_id").str.extract(SLURM_OUTPUT, 1).alias("job_id"))
        cands = jobs.drop_nulls("job_id").join(
            attempts.select(pl.col("_leader").alias("job_id"), "attempt_id", "_het"), on="job_id", how="inner"
        ).drop("job_id").join(fields, on="attempt_id", how="left")
    return cands.sort("file", "start_ts", "attempt_index", "_het", nulls_last=False, maintain_order=True).with_columns(
        pl.int_range(pl.len()).over("file").alias("_k")
    ).drop("attempt_index", "_het")


def tie_to_attempts(
    obs: pl.DataFrame, cands: pl.DataFrame, timezone: str = "UTC", given_node: str | None = None,
) -> pl.DataFrame:
    """Set each line's ``attempt_id``, map ranks to nodes, date stampless files — for every
    file of a batch at once (``cands`` from :func:`candidate_attempts`).

    A file whose stamps sit whole years away from its attempts (a year-less format dated
    by a copied file's mtime) is moved to its attempts' year first (:func:`_year_from_attempts`),
    and a zoneless stamp of the hour the autumn change repeats (in ``timezone``, the
    landing's) that its earlier reading puts before its attempts started takes the later
    one (:func:`_fold_from_attempts`).
    With several attempts (a requeued job), a line belongs to the last attempt that had
    started by its time (lines before the first start go to the first attempt; a file with
    no stamp at all goes to the last attempt, and its lines take that attempt's start
    instead of the ingest time, and so do the lines before a file's first stamp, which
    that stamp only bounds from above). A line with a Slurm task id (``slot``, see
    :data:`ingest.files.common.PLACEMENT_COLUMNS`) ran on ``nodes[slot // ranks_per_node]``
    (Slurm's tasks per node, ``gpus_per_node`` when unknown), or on ``nodes[slot]`` with a
    local-rank prefix behind the task id (one launcher per node), where local rank ``l`` is
    global rank ``slot × processes per node + l``; any other
    rank ``r`` ran on ``nodes[r // processes per node]``. Processes per node are Slurm's
    tasks per node, or ``gpus_per_node`` when it ran one task (a per-node launcher) per
    node. srun's own report of a task that ended badly (``srun: error: gpu052: task 2:
    Exited with exit code 1``) names the node of that task's lines outright
    (:func:`srun_task_nodes`). Every line of a one-node attempt's output (slurmstepd's, the
    launcher's, any rank's) ran on its node. A node the landing gave (``given_node``,
    ``--node``) is kept; so is a node the line names when it is one of the attempt's
    nodes, or when nothing places the line on one, but a name the attempt does not know
    (NCCL's prefix holds the host's own name, which may be an alias of the node Slurm
    names) yields to where the line's task ran. ``_outlasting`` marks the stamped lines more than
    :data:`OUTLASTING` after their attempt ended (counted in :class:`FileReport`).
    """
    if cands.is_empty():
        return untied_ranks(obs).with_columns(pl.lit(False).alias("_outlasting"))
    # The joins below carry only the columns they read and write; the result replaces those
    # columns of ``obs``.
    tied = obs.select("file", "ts", "ts_source", "rank", "node", *PLACEMENT_COLUMNS, "_backfilled", ZONELESS)
    stampless = tied.group_by("file").agg((pl.col("ts_source") == "ingest").all().alias("_stampless"))
    # Nothing dates the lines of a stampless file: Slurm rewrites the output file on
    # requeue unless told to append, so it most likely holds the last attempt.
    k = pl.col("_k")
    cands = cands.join(stampless, on="file", how="left").filter(
        ~pl.col("_stampless").fill_null(True) | (k == k.max().over("file"))
    )
    per_file = cands.group_by("file").agg(
        pl.col("attempt_id").sort_by("_k").first().alias("_first"),
        pl.col("start_ts").sort_by("_k").first().alias("_first_start"),
        pl.col("end_ts").max().alias("_last_end"),
        ((pl.len() > 1) & pl.col("start_ts").is_not_null().all()).alias("_split"),
    )
    tied = _year_from_attempts(tied.join(per_file, on="file", how="left", maintain_order="left"))
    tied = _fold_from_attempts(tied, timezone)
    # A file with no stamp at all, and the lines before a file's first stamp (which they
    # only bound from above), date from the attempt's start.
    start = pl.col("_first_start")
    dated = ((pl.col("ts_source") == "ingest") | (pl.col("_backfilled") & (start < pl.col("ts")))) & start.is_not_null()
    tied = tied.with_columns(
        pl.when(dated).then(pl.col("_first_start")).otherwise(pl.col("ts")).cast(TS_DTYPE).alias("ts"),
        pl.when(dated).then(pl.lit("inferred")).otherwise(pl.col("ts_source")).alias("ts_source"),
        pl.col("_first").alias("attempt_id"),
    )
    if tied["_split"].any():
        tied = tied.with_row_index("_row")
        split_files = per_file.filter(pl.col("_split")).select("file")
        # Of attempts that started together (a heterogeneous job's components), the line goes
        # to the first (the leader, where the batch script runs): the last of equal starts
        # is the one an as-of join takes.
        starts = cands.join(split_files, on="file", how="semi").select(
            "file", pl.col("start_ts").alias("_start"), pl.col("attempt_id").alias("_attempt"), "_k"
        ).sort("_start", "_k", descending=[False, True]).drop("_k")
        hits = (
            tied.filter(pl.col("_split").fill_null(False)).select("_row", "file", "ts").sort("ts")
            .join_asof(starts, left_on="ts", right_on="_start", by="file", strategy="backward",
                       check_sortedness=False)
        )
        tied = tied.join(hits.select("_row", "_attempt"), on="_row", how="left", maintain_order="left").with_columns(
            pl.coalesce("_attempt", "attempt_id").alias("attempt_id")
        ).drop("_attempt")
        split_cands = cands.join(split_files, on="file", how="semi")
        tied = _below_job_banner(tied, obs.select("program", "message"), split_cands)
        tied = _on_its_nodes_attempt(tied, split_cands)
    placed = cands.select(
        "attempt_id",
        pl.col("ranks_per_node").cast(pl.Int64).alias("_tasks"),
        processes_per_node().alias("_procs"),
        pl.col("gpus_per_node").cast(pl.Int64).alias("_gpus"),
        pl.col("nodes").alias("_nodes"),
        (pl.col("nodes").list.len() == 1).alias("_single"),
        pl.col("end_ts").alias("_end"),
    ).unique("attempt_id", keep="first").with_row_index("_a")
    # One row per (attempt, node index): looking the node up by a join is much cheaper than
    # copying each attempt's node list onto every line to index into it.
    slots = placed.select(
        "_a", pl.col("_nodes").alias("_node"), pl.int_ranges(pl.col("_nodes").list.len()).alias("_i"),
    ).explode(["_node", "_i"])
    procs = pl.col("_procs")
    # The task id says the node: behind it a local-rank prefix means one launcher per node
    # (the id is the node's index); a bare task id is one of the node's tasks (tasks per
    # node unknown: one per GPU).
    tasks = pl.coalesce("_tasks", "_gpus")
    task_node = pl.when(pl.col("local_rank").is_not_null()).then(pl.col("slot")).when(tasks > 0).then(pl.col("slot") // tasks)
    # A local rank under a task id gives the global rank, and so does a bare task id where
    # a task is a process (not a per-node launcher, whose own lines have no rank); in a
    # one-node attempt, or one whose nodes are unknown, the local rank is the best guess.
    bare = pl.col("rank").is_null() & pl.col("local_rank").is_null()
    rank = pl.coalesce(
        pl.col("rank").cast(pl.Int64),
        pl.col("_task_node") * procs + pl.col("local_rank"),
        pl.when(bare & (tasks == procs).fill_null(True)).then(pl.col("slot")),
        pl.when(pl.col("_single").fill_null(True)).then(pl.col("local_rank")),
    )
    index = pl.col("rank") // procs
    tied = (
        tied.join(placed.drop("_nodes"), on="attempt_id", how="left", maintain_order="left")
        .with_columns(task_node.alias("_task_node"))
        .with_columns(rank.alias("rank"))
        .with_columns(
            pl.when(pl.col("_single")).then(0).when(pl.col("_task_node").is_not_null()).then(pl.col("_task_node"))
            .when((procs > 0) & (index >= 0)).then(index).alias("_i")
        )
        .join(slots, on=["_a", "_i"], how="left", maintain_order="left")
        .join(srun_task_nodes(obs.with_columns(tied["attempt_id"])), on=["file", "attempt_id", "slot"], how="left",
              maintain_order="left")
        # srun's node must be one of the attempt's (a report copied from another job's output
        # moves nothing).
        .join(slots.select("_a", pl.col("_node").alias("_srun_node"), pl.lit(True).alias("_srun_ok")),
              on=["_a", "_srun_node"], how="left", maintain_order="left")
        # So must the node a line names itself to win over where its task ran: NCCL's prefix
        # is the host's own name, which need not be the name Slurm gives the node (an alias,
        # an old hostname).
        .with_columns(short_host(pl.col("node")).alias("_own"))
        .join(slots.select("_a", pl.col("_node").alias("_own"), pl.lit(True).alias("_own_ok")),
              on=["_a", "_own"], how="left", maintain_order="left")
        .select("ts", "ts_source", "attempt_id",
                pl.coalesce(pl.when(pl.col("_own_ok") | (pl.col("node") == pl.lit(given_node, dtype=pl.String)))
                            .then(pl.col("node")),
                            pl.when(pl.col("_srun_ok")).then(pl.col("_srun_node")), "_node", "node").alias("node"),
                pl.col("rank").cast(pl.Int32),
                ((pl.col("ts_source") == "line") & (pl.col("ts") > pl.col("_end") + OUTLASTING))
                .fill_null(False).alias("_outlasting"))
    )
    return obs.with_columns(tied.get_columns())


SRUN_TASKS = r"^srun: error: ([A-Za-z0-9][A-Za-z0-9._-]*): tasks? ([0-9][0-9,-]*): "
"""srun's report of tasks that ended badly, naming their node (``srun: error: nid01934:
tasks 2,4-5,7: Terminated``): group 1 the node, group 2 the task ids."""


def srun_task_nodes(obs: pl.DataFrame) -> pl.DataFrame:
    """``file``, ``attempt_id``, ``slot`` and ``_srun_node``: the node srun itself says each
    task of a job output ran on (:data:`SRUN_TASKS`), in the attempt the report's line is
    tied to (a requeued job's next run may place task 0 elsewhere). It wins over the block
    distribution, which needs the tasks per node, and the failing tasks are those whose
    lines matter most."""
    reports = obs.filter(pl.col("program") == "srun").select(
        "file", "attempt_id", pl.col("message").str.extract_groups(SRUN_TASKS).alias("_g")
    ).unnest("_g").drop_nulls("1")
    ranges = reports.select(
        "file", "attempt_id", short_host(pl.col("1")).alias("_srun_node"), pl.col("2").str.split(",").alias("_piece"),
    ).explode("_piece").with_columns(
        pl.col("_piece").str.extract(r"^([0-9]+)", 1).cast(pl.Int32, strict=False).alias("_lo"),
        pl.coalesce(pl.col("_piece").str.extract(r"-([0-9]+)$", 1), pl.col("_piece").str.extract(r"^([0-9]+)", 1))
        .cast(pl.Int32, strict=False).alias("_hi"),
    ).drop_nulls(["_lo", "_hi"])
    return (
        ranges.select("file", "attempt_id", "_srun_node",
                      pl.int_ranges("_lo", pl.col("_hi") + 1, dtype=pl.Int32).alias("slot"))
        .explode("slot")
        .unique(["file", "attempt_id", "slot"], keep="first", maintain_order=True)
    )


SCHEDULER_TOOLS = ("srun", "slurmstepd")
"""The programs whose lines below a job's cancellation banner are still that run's teardown
(``srun: Job step aborted: …``, ``srun: error: gpu052: task 3: Killed``)."""


def _below_job_banner(tied: pl.DataFrame, printed: pl.DataFrame, cands: pl.DataFrame) -> pl.DataFrame:
    """``tied`` with the unstamped lines of the next run of a requeued job, in its appended
    output, moved off the run before it.

    slurmstepd's banner for the whole job (:data:`~ingest.files.app.JOB_CANCELLED`: ``***
    JOB 81600 ON gx122 CANCELLED AT 2026-11-12T10:09:40 DUE TO JOB REQUEUE ***``) ends the
    run: below it come that run's srun/slurmstepd teardown lines, then, from the first line
    of any other program, what the next run printed. Lines without a stamp of their own
    inherit the banner's, which is before the next run started, so the split by start time
    gives them to the run that ended. They go to the first attempt that started after the
    banner's (a heterogeneous job's leader), dated no earlier than its start. ``printed``:
    the ``program`` and ``message`` of ``tied``'s rows."""
    banner = (pl.col("program") == "slurmstepd") & pl.col("message").str.contains(JOB_CANCELLED)
    marks = (
        tied.select("_row", "file", "ts", "ts_source", "attempt_id", "_split")
        .with_columns(printed["program"], printed["message"])
        .filter(pl.col("_split").fill_null(False))
        .with_columns(banner.fill_null(False).alias("_banner"))
    )
    if not marks["_banner"].any():
        return tied
    # The first attempt of the run that started next after each attempt of the file.
    runs = cands.group_by("file", "start_ts").agg(pl.col("attempt_id").sort_by("_k").first().alias("_next")) \
        .sort("file", "start_ts").with_columns(pl.col("_next").shift(-1).over("file"))
    nexts = cands.select("file", pl.col("attempt_id").alias("_ended"), "start_ts") \
        .join(runs, on=["file", "start_ts"]).drop("start_ts")
    starts = cands.select(pl.col("attempt_id").alias("_next"), pl.col("start_ts").alias("_next_start"))
    runs_of = cands.select("attempt_id", pl.col("start_ts").alias("_own_start"))
    segment = pl.col("_banner").cum_sum().over("file")
    below = (
        marks.with_columns(
            pl.when(pl.col("_banner")).then(pl.col("attempt_id")).forward_fill().over("file").alias("_ended"),
            segment.alias("_segment"),
        )
        # From the first line below the banner that is not the scheduler's teardown on.
        .filter((pl.col("_segment") > 0) & ~pl.col("_banner"))
        .filter((~pl.col("program").is_in(SCHEDULER_TOOLS).fill_null(False)).cum_sum().over("file", "_segment") > 0)
        .filter(pl.col("ts_source") != "line")
        .join(nexts, on=["file", "_ended"])
        .join(starts, on="_next")
        .join(runs_of, on="attempt_id")
        .filter(pl.col("_own_start") < pl.col("_next_start"))
        .select("_row", "_next", "_next_start")
    )
    if below.is_empty():
        return tied
    return tied.join(below, on="_row", how="left", maintain_order="left").with_columns(
        pl.coalesce("_next", "attempt_id").alias("attempt_id"),
        pl.when(pl.col("_next").is_not_null()).then(pl.max_horizontal("ts", "_next_start")).otherwise(pl.col("ts"))
        .cast(TS_DTYPE).alias("ts"),
    ).drop("_next", "_next_start")


def _on_its_nodes_attempt(tied: pl.DataFrame, cands: pl.DataFrame) -> pl.DataFrame:
    """``tied`` with each line of a file split between attempts (a requeued job's appended
    output) that names a node its time-assigned attempt did not run on, but another of the
    file's attempts did, moved to that attempt (the one that started nearest the line's
    stamp): the next run's NCCL banners inherit the stamp of the last run's cancellation
    banner above them, before that run started."""
    runs_on = cands.select("file", pl.col("attempt_id").alias("_other"), "start_ts", pl.col("nodes").alias("node")) \
        .explode("node")
    stray = (
        tied.filter(pl.col("node").is_not_null() & pl.col("_split").fill_null(False))
        .select("_row", "file", short_host(pl.col("node")).alias("node"), "ts", "attempt_id")
        .join(runs_on.select("file", pl.col("_other").alias("attempt_id"), "node"),
              on=["file", "attempt_id", "node"], how="anti")
    )
    if stray.is_empty():
        return tied
    moved = (
        stray.join(runs_on, on=["file", "node"])
        .sort("_row", (pl.col("start_ts") - pl.col("ts")).abs(), "_other")
        .unique("_row", keep="first", maintain_order=True)
        .select("_row", "_other")
    )
    return tied.join(moved, on="_row", how="left", maintain_order="left").with_columns(
        pl.coalesce("_other", "attempt_id").alias("attempt_id")
    ).drop("_other")


YEAR_SLACK = timedelta(days=1)
"""How far outside its attempts' run a job output's line may lie and still count as within
it (:func:`_year_from_attempts`)."""


def _year_from_attempts(tied: pl.DataFrame) -> pl.DataFrame:
    """Correct the year of the lines of a tied file that landed whole years away from its job.

    glog-style stamps (``W0210 08:01:48.551000``) carry no year, which then comes from the
    file's mtime: a job output copied without keeping its times lands a year late. A line
    outside its attempts' run (give or take :data:`YEAR_SLACK`) that a whole number of
    years would move into it moves by those years. Lines within the run stay, and so does
    a stamp that no whole-year move explains (a year-carrying stamp beside glog lines).
    """
    lo = pl.col("_first_start") - YEAR_SLACK
    hi = pl.coalesce("_last_end", "_first_start") + YEAR_SLACK

    def within(ts: pl.Expr) -> pl.Expr:
        return ((ts >= lo) & (ts <= hi)).fill_null(False)

    ts = pl.col("ts")
    # Only lines outside the run can move: the others get no offset (null), so the per-row
    # offset is built and applied for the few, not for every line of every job output.
    years = pl.when(~within(ts)).then(((pl.col("_first_start") - ts).dt.total_days() / 365.2425).round().cast(pl.Int64))
    moved = ts.dt.offset_by(pl.concat_str([years.cast(pl.String), pl.lit("y")]))
    moves = (years != 0).fill_null(False) & within(moved)
    return tied.with_columns(pl.when(moves).then(moved).otherwise(ts).alias("ts"))


FOLD_SLACK = timedelta(minutes=2)
"""How far before its attempt's start a job output's line may lie and still count as its
(:func:`_fold_from_attempts`): the batch script's first lines precede the recorded start by
nothing, a clock a little behind by seconds."""


def _fold_from_attempts(tied: pl.DataFrame, timezone: str) -> pl.DataFrame:
    """Read the zoneless stamps of a tied file's lines that fall in the hour the autumn
    change repeats at their later instant when the earlier one is before their attempt
    started and the later one is not (give or take :data:`FOLD_SLACK`): a job that started
    in the repeated hour printed its first lines in the second pass of it (glog and
    Python logging stamps carry no zone). Lines that inherited such a stamp move with it."""
    start = pl.col("_first_start")
    movable = (pl.col(ZONELESS) | (pl.col("ts_source") == "inferred")) & (pl.col("ts") < start - FOLD_SLACK)
    if timezone == "UTC" or not tied.select(movable.fill_null(False).any()).item():
        return tied
    wall = pl.col("ts").dt.convert_time_zone(timezone).dt.replace_time_zone(None)
    later = wall.dt.replace_time_zone(timezone, ambiguous="latest", non_existent="null").dt.convert_time_zone("UTC")
    end = pl.coalesce("_last_end", "_first_start")
    moves = movable & (later != pl.col("ts")) & (later >= start - FOLD_SLACK) & (later <= end + FOLD_SLACK)
    return tied.with_columns(
        pl.when(moves.fill_null(False)).then(later).otherwise(pl.col("ts")).cast(TS_DTYPE).alias("ts")
    )


def lake_slices(parsed: ParsedBatch, obs: pl.DataFrame) -> Iterator[tuple[str, str | None, pl.DataFrame, pl.Series]]:
    """What one parsed batch lands as: ``(table, source, rows, input_ids)`` — observations
    once per source partition, then the rejects of every file of the batch. A file whose
    every line was rejected (read as the wrong ``--source``) keeps the observations an
    earlier landing gave it: it is left out of the observations' inputs."""
    files = parsed.files
    rejected_whole = ~pl.col("file").is_in(obs["file"].unique().implode()) \
        & pl.col("file").is_in(parsed.rejects["file"].unique().implode())
    for name in sorted(files["source"].unique().to_list()):
        yield ("observations", name, obs.filter(pl.col("source") == name),
               files.filter((pl.col("source") == name) & ~rejected_whole)["input_id"])
    yield "rejects", None, parsed.rejects, files["input_id"]


def tied_batches(
    files: list[str], ctx: ParseContext, source: str | None, attempts: pl.DataFrame, attempt_id: str | None,
) -> Iterator[tuple[ParsedBatch, pl.DataFrame]]:
    """Read, parse and tie ``files`` batch by batch: each parsed batch with its observations
    tied to ``attempts`` (:func:`candidate_attempts`, :func:`tie_to_attempts`).

    The next batch is read, parsed and tied in a worker thread while the caller lands the
    current one (file reads, Polars and Parquet encoding release the GIL): two cores busy.
    """
    batches = read_batches(files, BATCH_BYTES, FIRST_BATCH_BYTES)

    def prepare() -> tuple[ParsedBatch, pl.DataFrame] | None:
        batch = next(batches, None)
        if batch is None:
            return None
        parsed = parse_batch(batch, ctx, source)
        cands = candidate_attempts(parsed.files, attempts, attempt_id=attempt_id)
        return parsed, tie_to_attempts(parsed.observations, cands, ctx.timezone, ctx.default_node)

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(prepare)
        while (ready := pending.result()) is not None:
            pending = pool.submit(prepare)
            yield ready


def land_batch(lake: Lake, parsed: ParsedBatch, obs: pl.DataFrame, cluster: str) -> pl.DataFrame:
    """Land one parsed batch and its tied observations (:func:`lake_slices`, each with one
    ``land_inputs``). Returns the batch's per-file counts, in file order
    (:data:`REPORT_SCHEMA`)."""
    files = parsed.files
    for table, source, rows, input_ids in lake_slices(parsed, obs):
        lake.land_inputs(table, rows, cluster=cluster, source=source, input_ids=input_ids)
    landed = obs.group_by("file").agg(
        pl.len().alias("landed"), pl.col("attempt_id").drop_nulls().unique().sort().alias("attempt_ids"),
        (pl.col("node").is_null() & pl.col("attempt_id").is_null()).sum().alias("unplaced"),
        pl.col("_outlasting").sum().alias("outlasting"),
    )
    rejected = parsed.rejects.group_by("file").agg(pl.len().alias("rejected"))
    return (
        files.join(landed, on="file", how="left").join(rejected, on="file", how="left").sort("file")
        .select(pl.col("input_id").alias("path"), "source", pl.col("attempt_ids").fill_null([]),
                pl.col("lines").alias("read"), pl.col("landed").fill_null(0), pl.col("rejected").fill_null(0),
                pl.col("unplaced").fill_null(0), "zoneless", pl.col("outlasting").fill_null(0), "cut")
        .cast(REPORT_SCHEMA)
    )


def land_log_files(
    lake: Lake,
    paths: Iterable[str | Path],
    *,
    cluster: str,
    source: str | None = None,
    node: str | None = None,
    attempt_id: str | None = None,
    year: int | None = None,
    boot_time: datetime | None = None,
    end_at_ingest: bool = False,
    node_pattern: str | None = None,
    timezone: str = "UTC",
) -> FilesReport:
    """Parse and land log files (or folders of them) into ``observations`` and ``rejects``.

    Every path and the ``source`` are checked before anything is read or landed (a bad one
    raises :class:`FilesError`). Each file lands under its resolved path as ``input_id``:
    landing it again, alone or with other files, replaces its rows, so re-landing is
    idempotent. ``node`` is the node of lines that name none, or ``node_pattern`` a regex
    whose first group finds it in each file's path (``/dmesg/([^/]+)[.]log$``: one call
    lands every node's kernel log); ``attempt_id`` ties every
    file to that attempt (default: Slurm output names are looked up in the lake's
    attempts); ``year``, ``boot_time``, ``end_at_ingest`` and ``timezone`` see
    :func:`ingest.files.read.read_log_file`. Returns per-file counts, in path order.
    """
    files = checked_files(paths, source=source, node=node, node_pattern=node_pattern, timezone=timezone)
    # Only Slurm output names and --attempt-id tie files to attempts: node logs (most
    # landing calls) skip reading the attempts table.
    tied = attempt_id is not None or any(SLURM_NAME.search(f) for f in files)
    attempts = known_attempts(lake, cluster if tied else None)
    ctx = ParseContext(
        year=year, boot_time=as_utc(boot_time), default_node=node,
        ingest_time=datetime.now(UTC), end_at_ingest=end_at_ingest, node_pattern=node_pattern,
        timezone=timezone,
    )
    tables = [
        land_batch(lake, parsed, obs, cluster)
        for parsed, obs in tied_batches(files, ctx, source, attempts, attempt_id)
    ]
    return FilesReport(pl.concat(tables) if tables else pl.DataFrame(schema=REPORT_SCHEMA))
