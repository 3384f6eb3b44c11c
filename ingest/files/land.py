"""Land log files: expand paths, tie each file to its attempt, write through the lake."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import polars as pl

from ingest.files.common import TS_DTYPE, FilesError
from ingest.files.detect import check_source
from ingest.files.read import ParsedFile, read_log_file
from ingest.lake import Lake

SLURM_OUTPUT = re.compile(r"^slurm-(?P<job>\d+(?:_\d+)?)\.out(?:\.gz)?$")
"""Slurm's default output names ``slurm-%j.out`` and ``slurm-%A_%a.out``."""


@dataclass(frozen=True)
class FileReport:
    """What happened to one file: lines read, observations landed, lines rejected."""

    path: str
    source: str
    attempt_ids: tuple[str, ...]
    read: int
    landed: int
    rejected: int


@dataclass
class FilesReport:
    """Per-file reports and totals of one :func:`land_log_files` call."""

    files: list[FileReport] = field(default_factory=list)

    @property
    def read(self) -> int:
        """Non-blank lines read over all files."""
        return sum(f.read for f in self.files)

    @property
    def landed(self) -> int:
        """Observations landed over all files."""
        return sum(f.landed for f in self.files)

    @property
    def rejected(self) -> int:
        """Lines sent to ``rejects`` over all files."""
        return sum(f.rejected for f in self.files)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named by ``paths``: files as given, directories recursed (sorted, hidden
    entries skipped), duplicates removed. Raises :class:`FilesError` for a missing path or
    a directory without files, before anything is read."""
    out: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            out[path.resolve()] = None
        elif path.is_dir():
            found = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                raise FilesError(f"{path}: directory holds no files; point at the log files or their folder")
            out.update((p.resolve(), None) for p in found)
        else:
            raise FilesError(f"{path}: no such file or directory; check the path")
    if not out:
        raise FilesError("no input paths given; pass at least one log file or folder")
    return list(out)


def job_id_from_name(path: Path) -> str | None:
    """The Slurm job id in a default output file name (``slurm-1234.out`` → ``"1234"``,
    ``slurm-1234_7.out`` → ``"1234_7"``), else None."""
    match = SLURM_OUTPUT.match(path.name)
    return match.group("job") if match else None


ATTEMPT_FIELDS = ["attempt_id", "start_ts", "end_ts", "nodes", "ranks_per_node", "gpus_per_node"]


def known_attempts(lake: Lake, cluster: str) -> pl.DataFrame:
    """The cluster's attempts, read once per landing call (not once per file)."""
    return lake.scan("attempts", clusters=[cluster]).select(ATTEMPT_FIELDS + ["job_id", "attempt_index"]).collect()


def find_attempts(
    attempts: pl.DataFrame, parsed: ParsedFile, *, attempt_id: str | None
) -> pl.DataFrame:
    """The attempts a file's lines may belong to (:data:`ATTEMPT_FIELDS` columns).

    ``attempt_id`` wins (a row with just the id when the lake does not know it). Otherwise
    a ``slurm-%j.out`` name selects every attempt of that job: a requeued job appends all
    its attempts to one output file, and :func:`tie_to_attempts` splits the lines by time.
    """
    if attempt_id is not None:
        rows = attempts.filter(pl.col("attempt_id") == attempt_id)
        if not rows.height:
            rows = pl.concat([rows, pl.DataFrame({"attempt_id": [attempt_id]})], how="diagonal_relaxed")
        return rows.select(ATTEMPT_FIELDS)
    job_id = job_id_from_name(parsed.path)
    if job_id is None:
        return attempts.head(0).select(ATTEMPT_FIELDS)
    return (
        attempts.filter(pl.col("job_id") == job_id)
        .sort("attempt_index", "start_ts", nulls_last=False)
        .select(ATTEMPT_FIELDS)
    )


def tie_to_attempts(parsed: ParsedFile, attempts: pl.DataFrame) -> ParsedFile:
    """Set each line's ``attempt_id``, map ranks to nodes, date stampless files.

    With several attempts (a requeued job), a line belongs to the last attempt that had
    started by its time (lines before the first start go to the first attempt; a file with
    no stamp at all goes to the last attempt). Rank ``r``
    runs on ``nodes[r // ranks_per_node]`` of its attempt (``gpus_per_node`` when the ranks
    per node are unknown), joined on the node index; a node already known from the line or
    ``--node`` is kept. In a file with no stamp at all, lines take the first attempt's start
    instead of the ingest time.
    """
    if attempts.is_empty():
        return parsed
    obs = parsed.observations
    ordered = attempts.sort("start_ts", nulls_last=False)
    if (obs["ts_source"] == "ingest").all():
        # Nothing dates the lines: Slurm rewrites the output file on requeue unless told to
        # append, so an unstamped file most likely holds the last attempt.
        ordered = ordered.tail(1)
    first = ordered.row(0, named=True)
    if first["start_ts"] is not None:
        dated = pl.col("ts_source") == "ingest"
        obs = obs.with_columns(
            pl.when(dated).then(pl.lit(first["start_ts"], dtype=TS_DTYPE)).otherwise(pl.col("ts")).alias("ts"),
            pl.when(dated).then(pl.lit("inferred")).otherwise(pl.col("ts_source")).alias("ts_source"),
        )
    if ordered.height == 1 or ordered["start_ts"].null_count():
        obs = obs.with_columns(pl.lit(first["attempt_id"], dtype=pl.String).alias("attempt_id"))
    else:
        starts = ordered.select(pl.col("start_ts").alias("_start"), pl.col("attempt_id").alias("_attempt"))
        obs = (
            obs.with_row_index("_row").sort("ts")
            .join_asof(starts, left_on="ts", right_on="_start", strategy="backward")
            .with_columns(pl.coalesce("_attempt", pl.lit(first["attempt_id"])).alias("attempt_id"))
            .sort("_row").drop("_row", "_start", "_attempt")
        )
    placed = (
        ordered.select(
            "attempt_id",
            pl.coalesce("ranks_per_node", "gpus_per_node").cast(pl.Int64).alias("_per_node"),
            pl.col("nodes").alias("_rank_node"),
        )
        .filter(pl.col("_per_node").is_not_null() & (pl.col("_per_node") > 0))
        .explode("_rank_node")
        .with_columns(pl.int_range(pl.len()).over("attempt_id").alias("_index"))
    )
    obs = (
        obs.join(placed.select("attempt_id", "_per_node").unique(), on="attempt_id", how="left", maintain_order="left")
        .with_columns((pl.col("rank").cast(pl.Int64) // pl.col("_per_node")).alias("_index"))
        .join(placed.select("attempt_id", "_index", "_rank_node"), on=["attempt_id", "_index"], how="left",
              maintain_order="left")
        .with_columns(pl.coalesce("node", "_rank_node").alias("node"))
        .drop("_per_node", "_index", "_rank_node")
    )
    return replace(parsed, observations=obs)


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
) -> FilesReport:
    """Parse and land log files (or folders of them) into ``observations`` and ``rejects``.

    Every path and the ``source`` are checked before anything is read or landed (a bad one
    raises :class:`FilesError`). Each file lands under its resolved path as ``input_id``:
    landing it again replaces its rows, so re-landing is idempotent. ``node`` is the node of
    lines that name none; ``attempt_id`` ties every file to that attempt (default: Slurm
    output names are looked up in the lake's attempts); ``end_at_ingest`` see
    :func:`read_log_file`. Returns per-file counts.
    """
    if source is not None:
        check_source(source)
    files = expand_paths(paths)
    report = FilesReport()
    attempts = known_attempts(lake, cluster)
    for path in files:
        parsed = read_log_file(path, source=source, year=year, boot_time=boot_time, default_node=node,
                               end_at_ingest=end_at_ingest)
        parsed = tie_to_attempts(parsed, find_attempts(attempts, parsed, attempt_id=attempt_id))
        lake.land("observations", parsed.observations, cluster=cluster,
                  input_id=parsed.input_id, source=parsed.source)
        lake.land("rejects", parsed.rejects, cluster=cluster, input_id=parsed.input_id)
        report.files.append(FileReport(
            path=parsed.input_id,
            source=parsed.source,
            attempt_ids=tuple(sorted(parsed.observations["attempt_id"].drop_nulls().unique().to_list())),
            read=parsed.lines,
            landed=parsed.observations.height,
            rejected=parsed.rejects.height,
        ))
    return report
