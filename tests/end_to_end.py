"""Attribute a small hand-written case the way a user would: a saved ``sacct --parsable2``
dump through the Slurm connector, a folder of logs through the files landing, one run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files


def verdicts_by_job(root: Path, sacct: str, logs: Path, day: date, **land_options) -> dict[str, dict]:
    """Land ``sacct`` (the dump's text, UTC) and every file under ``logs`` into a lake
    under ``root`` (cluster ``c1``), attribute ``day``, and return the verdicts by job id.
    ``land_options`` go to :func:`ingest.files.land_log_files` (``year=``…)."""
    (root / "sacct.txt").write_text(sacct)
    lake = landing_lake(root / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[root / "sacct.txt"], timezone="UTC"), "c1"), None)
    assert report.error is None, report.error
    land_log_files(lake, [logs], cluster="c1", **land_options)
    return {row["job_id"]: row for row in run_attribution(lake, day, day).verdicts.to_dicts()}
