"""A run over one day reads back as far as its attempts started: a job that ran for days
before it ended in the window still sees the fault of its first day. What a run reads
around an attempt does not depend on the other attempts of its chunk."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from engine.config import EngineConfig
from engine.run import run_attribution, run_window
from ingest.files import land_log_files
from ingest.lake import Lake
from ingest.static import land_static_context

# Line shape of a real XID 79 (NVIDIA open-gpu-kernel-modules#1150).
XID_79 = "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def _lake(tmp_path, attempts: str, node: str, stamp: str) -> Lake:
    """A lake holding the static context ``attempts`` (YAML items of cluster ``c``) and
    ``node``'s rsyslog ISO log of one XID 79 at ``stamp``."""
    lake = Lake(tmp_path / "lake")
    context = tmp_path / "ctx.yaml"
    context.write_text(f"cluster: c\nattempts:\n{attempts}")
    land_static_context(lake, context)
    syslog = tmp_path / f"{node}.log"
    syslog.write_text(f"{stamp} {node} {XID_79}\n")
    land_log_files(lake, [syslog], cluster="c", source="syslog")
    return lake


def test_long_attempt_sees_the_fault_of_its_first_day(tmp_path):
    lake = _lake(tmp_path, "  - job_id: '9'\n    start: 2026-11-25T08:00:00Z\n    end: 2026-11-28T02:00:00Z\n"
                 "    state: FAILED\n    exit_code: '1:0'\n    nodes: 'n[1-2]'\n", "n2", "2026-11-25T09:00:00.000000+00:00")
    summary = run_attribution(lake, date(2026, 11, 28), date(2026, 11, 28))
    verdict = summary.verdicts.row(0, named=True)
    assert (verdict["cause"], verdict["culprit_nodes"]) == ("gpu.fallen_off_bus", ["n2"])


def _quiet_node_errors(tmp_path, later: str, chunk_attempts: int) -> list[str]:
    """The node-log coverage errors of attempt 1 (n1, 2026-11-25 20:00–21:00, nothing
    logged by n1 during it) when n1's syslog has a line at 10:00 that day and one at
    ``later``; attempt 2 runs on n2 until 2026-11-27 05:00, so one chunk for both reads
    n1's log two days on."""
    tmp_path.mkdir(exist_ok=True)
    lake = Lake(tmp_path / "lake")
    context = tmp_path / "ctx.yaml"
    context.write_text(
        "cluster: c\nattempts:\n"
        "  - job_id: '1'\n    start: 2026-11-25T20:00:00Z\n    end: 2026-11-25T21:00:00Z\n"
        "    state: COMPLETED\n    exit_code: '0:0'\n    nodes: n1\n"
        "  - job_id: '2'\n    start: 2026-11-27T04:00:00Z\n    end: 2026-11-27T05:00:00Z\n"
        "    state: COMPLETED\n    exit_code: '0:0'\n    nodes: n2\n"
    )
    land_static_context(lake, context)
    session = " systemd[1]: Started session-4.scope - Session 4 of User root.\n"
    logs = {"n1": ["2026-11-25T10:00:00.000000+00:00", later], "n2": ["2026-11-27T04:30:00.000000+00:00"]}
    for node, stamps in logs.items():
        path = tmp_path / f"{node}.log"
        path.write_text("".join(f"{stamp} {node}{session}" for stamp in stamps))
        land_log_files(lake, [path], cluster="c", source="syslog")
    config = EngineConfig(chunk_attempts=chunk_attempts)
    summary = run_attribution(lake, date(2026, 11, 25), date(2026, 11, 27), config=config)
    coverage = summary.verdicts.filter(pl.col("job_id") == "1")["coverage"][0]
    return [entry["error"] for entry in coverage if entry["source"] == "node_logs"]


@pytest.mark.parametrize("chunk_attempts", [1, 10])
def test_a_quiet_node_is_told_from_a_missing_log_alike_in_any_chunk(tmp_path, chunk_attempts):
    # A line five hours after the attempt: the log was written throughout, n1 was quiet.
    assert _quiet_node_errors(tmp_path, "2026-11-26T02:00:00.000000+00:00", chunk_attempts) == []
    # The next line thirty hours on, beyond the quiet horizon: missing, whether or not the
    # run's chunk happens to read that later day for another attempt.
    later = _quiet_node_errors(tmp_path / "far", "2026-11-27T03:00:00.000000+00:00", chunk_attempts)
    assert later == [f"no {'/'.join(EngineConfig().node_log_sources)} rows for n1"]


@pytest.mark.parametrize(("since", "until"), [("2026-09-01", "2027-01-31"), ("1900-01-01", "2999-12-31")])
def test_a_window_wider_than_the_lake_reads_what_a_tight_one_does(tmp_path, since, until):
    """A run visited every day of its window: ``--since 1900-01-01 --until 2999-12-31`` read
    400,000 days. Narrowed to the lake's attempts, it reads the days a window tight around
    them reads, and gives their verdicts."""
    lake = _lake(
        tmp_path,
        "  - job_id: '1'\n    start: 2026-11-25T08:00:00Z\n    end: 2026-11-25T10:00:00Z\n"
        "    state: FAILED\n    exit_code: '1:0'\n    nodes: n1\n"
        "  - job_id: '2'\n    start: 2026-11-27T04:00:00Z\n    end: 2026-11-27T05:00:00Z\n"
        "    state: COMPLETED\n    exit_code: '0:0'\n    nodes: n2\n",
        "n1", "2026-11-25T09:00:00.000000+00:00",
    )

    def run(first: date, last: date) -> tuple[pl.DataFrame, list[str]]:
        said: list[str] = []
        summary = run_attribution(lake, first, last, progress=said.append)
        read = [message.rsplit(" of ", 1)[1] for message in said if message.startswith("extracted ")]
        return summary.verdicts.drop("run_id", "run_ts"), read

    tight, tight_days = run(date(2026, 11, 25), date(2026, 11, 27))
    wide, wide_days = run(date.fromisoformat(since), date.fromisoformat(until))
    assert wide_days == tight_days == [f"2026-11-{day}" for day in range(24, 29)]
    assert wide.equals(tight)
    assert tight["cause"].to_list() == ["gpu.fallen_off_bus", "none"]


def test_a_window_without_attempts_is_narrowed_to_the_logs_it_holds(tmp_path):
    """A run over days no attempt ended on attributes nothing but still rewrites the events
    of their logs, which trend queries read: such a window narrows to the lake's logs."""
    lake = _lake(tmp_path, "  - job_id: '1'\n    start: 2026-11-25T08:00:00Z\n    end: 2026-11-25T10:00:00Z\n"
                 "    state: COMPLETED\n    nodes: n1\n", "n1", "2026-12-02T09:00:00.000000+00:00")
    assert run_window(lake, date(1900, 1, 1), date(2999, 12, 31)) == (date(2026, 11, 25), date(2026, 11, 25))
    assert run_window(lake, date(2026, 11, 28), date(2999, 12, 31)) == (date(2026, 12, 2), date(2026, 12, 2))
    assert run_window(lake, date(2027, 1, 1), date(2999, 12, 31)) == (date(2027, 1, 1), date(2027, 1, 1))
    run_attribution(lake, date(2026, 11, 28), date(2999, 12, 31))
    assert lake.scan("events").collect()["event"].to_list() == ["xid_79_fallen_off_bus"]
