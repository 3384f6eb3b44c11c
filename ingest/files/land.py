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
    attempt_id: str | None
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


def find_attempt(
    lake: Lake, cluster: str, parsed: ParsedFile, *, attempt_id: str | None
) -> dict | None:
    """The attempt row a file belongs to, or None.

    ``attempt_id`` wins (a row with just the id when the lake does not know it). Otherwise
    a ``slurm-%j.out`` name selects the job's attempts: the one whose ``[start_ts, end_ts]``
    (open end while running) holds all stamped lines, else the last attempt.
    """
    attempts = lake.scan("attempts", clusters=[cluster])
    if attempt_id is not None:
        rows = attempts.filter(pl.col("attempt_id") == attempt_id).collect()
        return rows.row(0, named=True) if rows.height else {"attempt_id": attempt_id}
    job_id = job_id_from_name(parsed.path)
    if job_id is None:
        return None
    rows = (
        attempts.filter(pl.col("job_id") == job_id)
        .sort("attempt_index", "start_ts", nulls_last=False)
        .collect()
    )
    if not rows.height:
        return None
    stamped = parsed.observations.filter(pl.col("ts_source").is_in(["line", "monotonic"]))
    if stamped.height:
        first, last = stamped["ts"].min(), stamped["ts"].max()
        holds = rows.filter(
            (pl.col("start_ts") <= first)
            & (pl.col("end_ts").is_null() | (pl.col("end_ts") >= last))
        )
        if holds.height:
            return holds.row(-1, named=True)
    return rows.row(-1, named=True)


def tie_to_attempt(parsed: ParsedFile, attempt: dict | None) -> ParsedFile:
    """Set ``attempt_id``; map ranks to nodes by block distribution; date stampless files.

    Rank ``r`` runs on ``nodes[r // ranks_per_node]`` (``gpus_per_node`` when the ranks
    per node are unknown), joined on the node index; a node already known from the line
    or ``--node`` is kept. In a file with no stamp at all, lines take the attempt start
    instead of the ingest time.
    """
    if attempt is None:
        return parsed
    obs = parsed.observations.with_columns(pl.lit(attempt["attempt_id"], dtype=pl.String).alias("attempt_id"))
    nodes = attempt.get("nodes") or []
    per_node = attempt.get("ranks_per_node") or attempt.get("gpus_per_node")
    if nodes and per_node:
        node_index = pl.DataFrame(
            {"_index": list(range(len(nodes))), "_rank_node": nodes},
            schema={"_index": pl.Int64, "_rank_node": pl.String},
        )
        obs = (
            obs.with_columns((pl.col("rank").cast(pl.Int64) // per_node).alias("_index"))
            .join(node_index, on="_index", how="left", maintain_order="left")
            .with_columns(pl.coalesce("node", "_rank_node").alias("node"))
            .drop("_index", "_rank_node")
        )
    start = attempt.get("start_ts")
    if start is not None:
        dated = pl.col("ts_source") == "ingest"
        obs = obs.with_columns(
            pl.when(dated).then(pl.lit(start, dtype=TS_DTYPE)).otherwise(pl.col("ts")).alias("ts"),
            pl.when(dated).then(pl.lit("inferred")).otherwise(pl.col("ts_source")).alias("ts_source"),
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
) -> FilesReport:
    """Parse and land log files (or folders of them) into ``observations`` and ``rejects``.

    Every path and the ``source`` are checked before anything is read or landed (a bad one
    raises :class:`FilesError`). Each file lands under its resolved path as ``input_id``:
    landing it again replaces its rows, so re-landing is idempotent. ``node`` is the node of
    lines that name none; ``attempt_id`` ties every file to that attempt (default: Slurm
    output names are looked up in the lake's attempts). Returns per-file counts.
    """
    if source is not None:
        check_source(source)
    files = expand_paths(paths)
    report = FilesReport()
    for path in files:
        parsed = read_log_file(path, source=source, year=year, boot_time=boot_time, default_node=node)
        attempt = find_attempt(lake, cluster, parsed, attempt_id=attempt_id)
        parsed = tie_to_attempt(parsed, attempt)
        lake.land("observations", parsed.observations, cluster=cluster,
                  input_id=parsed.input_id, source=parsed.source)
        lake.land("rejects", parsed.rejects, cluster=cluster, input_id=parsed.input_id)
        report.files.append(FileReport(
            path=parsed.input_id,
            source=parsed.source,
            attempt_id=attempt["attempt_id"] if attempt else None,
            read=parsed.lines,
            landed=parsed.observations.height,
            rejected=parsed.rejects.height,
        ))
    return report
