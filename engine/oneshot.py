"""Whole-pipeline conveniences: the bundled demo and one-shot diagnosis of log files.

Both land their inputs into a lake (a temporary one unless told otherwise) with the same
connectors a nightly run uses, then run the same engine: nothing here has its own logic
for attribution.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Literal

import polars as pl
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from engine.run import RunSummary, run_attribution
from ingest.files import land_log_files
from ingest.lake import Lake
from ingest.static import land_static_context

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT / "data" / "samples"


class ManifestInput(BaseModel):
    """One input of a sample manifest: a static context file or log files."""

    model_config = ConfigDict(extra="forbid")
    path: str
    kind: Literal["static", "files"]
    source: str | None = None
    node: str | None = None
    attempt: str | None = None
    year: int | None = None
    boot_time: datetime | None = None


class Manifest(BaseModel):
    """``data/samples/manifest.yaml``: the cluster and how to ingest each input."""

    model_config = ConfigDict(extra="forbid")
    cluster: str
    inputs: list[ManifestInput]


@dataclass
class IngestCounts:
    """Lines read, landed as observations, and rejected, over several inputs."""

    read: int = 0
    landed: int = 0
    rejected: int = 0
    attempts: int = 0

    def add_files(self, report) -> None:
        """Fold in a files report (``ingest.files.FilesReport``)."""
        self.read += report.read
        self.landed += report.landed
        self.rejected += report.rejected


def load_manifest(path: Path) -> Manifest:
    """Read and validate a sample manifest; errors name the file and the field."""
    try:
        return Manifest.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the manifest: {exc}") from exc
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid manifest: {exc}") from exc


def land_manifest(lake: Lake, manifest_path: Path) -> IngestCounts:
    """Land every input a manifest names (paths relative to the manifest's folder)."""
    manifest = load_manifest(manifest_path)
    base = manifest_path.parent
    counts = IngestCounts()
    for item in manifest.inputs:
        if item.kind == "static":
            counts.attempts += land_static_context(lake, base / item.path)["attempts"]
    for item in manifest.inputs:
        if item.kind == "files":
            counts.add_files(land_log_files(
                lake, [base / item.path], cluster=manifest.cluster, source=item.source,
                node=item.node, attempt_id=item.attempt, year=item.year, boot_time=item.boot_time,
            ))
    return counts


def attempt_days(lake: Lake) -> tuple[date, date]:
    """The first and last end day of the attempts in a lake."""
    ends = lake.scan("attempts").select(pl.col("end_ts").min().alias("lo"), pl.col("end_ts").max().alias("hi")).collect()
    lo, hi = ends.row(0)
    if lo is None:
        raise ValueError(f"{lake.root}: the lake holds no ended attempt — land a context first")
    return lo.date(), hi.date()


def run_demo(lake: Lake, samples: Path = SAMPLES, progress=None) -> tuple[IngestCounts, RunSummary]:
    """Land the bundled sample fleet into ``lake`` and attribute every attempt in it."""
    counts = land_manifest(lake, samples / "manifest.yaml")
    since, until = attempt_days(lake)
    return counts, run_attribution(lake, since, until, progress=progress)


DIAGNOSE_CLUSTER = "local"
DIAGNOSE_ATTEMPT = "diagnose/local/0"


def diagnose(
    lake: Lake, paths: list[Path], *, context: Path | None = None, source: str | None = None,
    year: int | None = None, boot_time: datetime | None = None, timezone: str = "UTC",
) -> tuple[IngestCounts, RunSummary]:
    """One-shot attribution of log files.

    With ``context`` (a static context file) the files are ingested as in a nightly run and
    every attempt of the context gets a verdict. Without it, the files are taken to be one
    failed attempt: every line is tied to it (so lines without host names or timestamps are
    still used), and it spans the nodes and the time the lines mention. ``timezone`` is the
    zone of stamps that carry none (:func:`ingest.files.land_log_files`).
    """
    counts = IngestCounts()
    if context is not None:
        counts.attempts = land_static_context(lake, context)["attempts"]
        cluster = lake.scan("attempts").select("cluster").first().collect().item()
        counts.add_files(land_log_files(lake, paths, cluster=cluster, source=source, year=year, boot_time=boot_time,
                                      timezone=timezone))
    else:
        counts.add_files(land_log_files(
            lake, paths, cluster=DIAGNOSE_CLUSTER, source=source, attempt_id=DIAGNOSE_ATTEMPT,
            year=year, boot_time=boot_time, end_at_ingest=True, timezone=timezone,
        ))
        counts.attempts = 1
        _land_implied_attempt(lake)
    since, until = attempt_days(lake)
    return counts, run_attribution(lake, since, until)


def _land_implied_attempt(lake: Lake) -> None:
    """The failed attempt a bare set of log files implies: their nodes and time span."""
    span = lake.scan("observations").select(
        pl.col("ts").min().alias("start_ts"),
        pl.col("ts").max().alias("end_ts"),
        pl.col("node").drop_nulls().unique().sort().implode().alias("nodes"),
    ).collect()
    start, end, nodes = span.row(0)
    if start is None:
        raise ValueError("the files hold no line to diagnose")
    now = datetime.now(UTC)
    lake.land("attempts", pl.DataFrame({
        "attempt_id": [DIAGNOSE_ATTEMPT], "scheduler": ["static"], "job_id": ["local"],
        "job_name": [None], "user": [None], "partition": [None], "attempt_index": [0],
        "submit_ts": [start], "start_ts": [start], "end_ts": [end or now], "raw_state": ["FAILED"],
        "state": ["failed"], "exit_code": [None], "signal": [None], "nodes": [nodes or []],
        "n_nodes": [len(nodes or [])], "ranks_per_node": [None], "gpus_per_node": [None],
        "origin": ["diagnose"],
    }, schema_overrides={"nodes": pl.List(pl.String), "job_name": pl.String, "user": pl.String, "partition": pl.String,
                         "exit_code": pl.Int32, "signal": pl.Int32, "ranks_per_node": pl.Int32,
                         "gpus_per_node": pl.Int32}), cluster=DIAGNOSE_CLUSTER)
