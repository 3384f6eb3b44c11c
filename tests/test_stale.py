"""``causelake run --stale``: only the days whose verdicts are older than what they were
drawn from — a node's log delivered a night late, a requeued run's accounting, another
rule pack — are attributed again; the other days keep their verdicts."""

from __future__ import annotations

import os
import time
from datetime import date

import pytest
from typer.testing import CliRunner

from engine.cli import app
from engine.rules.loader import load_rule_pack
from engine.run import landing_lake, run_attribution
from engine.stale import spans, stale_days
from ingest.connectors import run_connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files
from tests.end_to_end import ALIVE, XID_79, watchdog_timeout

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|s[1-2]|gres/gpu=16,node=2
901|901|train|alice|FAILED|1:0|2026-11-22T10:00:00|2026-11-22T10:30:00|s[3-4]|gres/gpu=16,node=2
"""
DAY1, DAY3 = date(2026, 11, 20), date(2026, 11, 22)


def _syslog(node: str, day: str, *lines: tuple[str, str]) -> str:
    """rsyslog ISO lines of ``node`` on ``day``."""
    return "".join(f"{day}T{clock}.000000+00:00 {node} {message}\n" for clock, message in lines)


def _land(lake, logs, files: list[str]) -> None:
    land_log_files(lake, [logs / name for name in files], cluster="c1")


@pytest.fixture
def lake(tmp_path):
    (tmp_path / "sacct.txt").write_text(SACCT)
    lake = landing_lake(tmp_path / "lake")
    assert run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[tmp_path / "sacct.txt"], timezone="UTC"),
                                              "c1"), None).error is None
    logs = tmp_path / "logs"
    logs.mkdir()
    for job, day, nodes in (("900", "2026-11-20", ("s1", "s2")), ("901", "2026-11-22", ("s3", "s4"))):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:29:00") + "\n" for r in range(8)))
        for node in nodes:
            (logs / f"{node}.log").write_text(_syslog(node, day, ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    # s2's log with the XID arrives a night late.
    (logs / "late").mkdir()
    (logs / "late" / "s2.log").write_text(_syslog("s2", "2026-11-20", ("10:05:00", ALIVE),
                                                  ("10:20:00", f"kernel: {XID_79}"), ("10:25:00", ALIVE)))
    _land(lake, logs, ["slurm-900.out", "slurm-901.out", "s1.log", "s2.log", "s3.log", "s4.log"])
    return lake, logs


def _after_a_second() -> None:
    """A run's stamp is to the second, and a file of that second counts as before it: land the
    next file in a later second."""
    time.sleep(1.1)


def test_fresh_verdicts_are_not_stale_and_unattributed_days_are(lake):
    lake, _ = lake
    version = load_rule_pack().version
    assert stale_days(lake, DAY1, DAY3, pack_version=version) == [DAY1, DAY3]  # never attributed
    run_attribution(lake, DAY1, DAY3)
    assert stale_days(lake, DAY1, DAY3, pack_version=version) == []
    assert stale_days(lake, DAY1, DAY3, pack_version="other") == [DAY1, DAY3]


def test_a_log_landed_after_the_run_makes_its_days_stale_and_run_stale_redoes_only_them(lake):
    lake, logs = lake
    version = load_rule_pack().version
    before = {row["job_id"]: row for row in run_attribution(lake, DAY1, DAY3).verdicts.to_dicts()}
    assert before["900"]["cause"] == "unknown.symptoms_only"
    _after_a_second()
    land_log_files(lake, [logs / "late" / "s2.log"], cluster="c1")
    assert stale_days(lake, DAY1, DAY3, pack_version=version) == [DAY1]
    runs = len(list((lake.root / "runs").glob("run-*.json")))
    said = CliRunner().invoke(app, ["run", "--lake", str(lake.root), "--since", "2026-11-20", "--until",
                                    "2026-11-22", "--stale", "--show", "0"], env={"COLUMNS": "200"}).output
    assert "1 of the window's days have stale verdicts: 2026-11-20" in said
    assert len(list((lake.root / "runs").glob("run-*.json"))) == runs + 1
    verdicts = {row["job_id"]: row for row in lake.scan("results").collect().to_dicts()}
    assert (verdicts["900"]["cause"], verdicts["900"]["culprit_nodes"]) == ("gpu.fallen_off_bus", ["s2"])
    assert verdicts["901"]["run_id"] == before["901"]["run_id"]  # its day was not run again
    assert stale_days(lake, DAY1, DAY3, pack_version=version) == []


def test_consecutive_days_run_together():
    assert spans([date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 4)]) == [
        (date(2026, 1, 1), date(2026, 1, 2)), (date(2026, 1, 4), date(2026, 1, 4))]


def test_a_run_with_nothing_stale_attributes_nothing(lake):
    lake, _ = lake
    run_attribution(lake, DAY1, DAY3)
    runs = len(list((lake.root / "runs").glob("run-*.json")))
    said = CliRunner().invoke(app, ["run", "--lake", str(lake.root), "--day", "2026-11-20", "--stale"]).output
    assert "0 of the window's days have stale verdicts — nothing to attribute" in " ".join(said.split())
    assert len(list((lake.root / "runs").glob("run-*.json"))) == runs
    assert os.path.isdir(lake.root / "results")
