"""Parsing sacct output (parsable2, 22.05 JSON, 23.x+ JSON) into attempts.

Fixtures in tests/fixtures/slurm/ (provenance in its README.md): real Slurm 22.05.8
output of one lab session, and a hand-made 24.05-shape JSON built from the documented
``data_parser/v0.0.40`` field paths.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from ingest.connectors import run_connector
from ingest.connectors.base import ConnectorError, FetchWindow
from ingest.connectors.slurm import (
    SlurmConnector, SlurmOptions, build_attempts, merge_rows, parse_sacct,
)
from ingest.lake import Lake
from ingest.schema import ATTEMPTS

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
CORPUS = ["parsable2_all_steps_D.txt", "parsable2_alloc_D.txt", "sacct_json_all.json", "sacct_json_job2.json"]


def utc(hms: str, day: str = "2026-11-30") -> datetime:
    return datetime.fromisoformat(f"{day}T{hms}+00:00")


# attempt_id, job_id, state, raw_state, exit_code, start, end — the lab session's truth
# (parsable2_all_steps_D.txt); signals checked separately since the two formats differ.
EXPECTED = [
    ("slurm/lab/1/0", "1", "completed", "COMPLETED", 0, "15:37:03", "15:37:03"),
    ("slurm/lab/10/0", "5_2", "failed", "FAILED", 1, "15:37:09", "15:37:09"),
    ("slurm/lab/11/0", "11", "node_fail", "NODE_FAIL", 0, "15:38:06", "15:38:10"),
    ("slurm/lab/12/0", "12", "cancelled", "CANCELLED by 0", 0, "15:38:10", "15:39:57"),
    ("slurm/lab/2/0", "2", "failed", "FAILED", 3, "15:37:03", "15:37:03"),
    ("slurm/lab/3/0", "3", "completed", "COMPLETED", 0, "15:37:06", "15:37:06"),
    ("slurm/lab/4/0", "4", "failed", "FAILED", 0, "15:37:06", "15:37:06"),
    ("slurm/lab/5/0", "5_3", "completed", "COMPLETED", 0, "15:37:12", "15:37:12"),
    ("slurm/lab/6/0", "6", "preempted", "REQUEUED", 75, "15:37:12", "15:37:12"),
    ("slurm/lab/6/1", "6", "completed", "COMPLETED", 0, "15:39:22", "15:39:22"),
    ("slurm/lab/7/0", "7", "node_fail", "NODE_FAIL", 0, "15:37:15", "15:38:10"),
    ("slurm/lab/7/1", "7", "timeout", "TIMEOUT", 0, "15:40:22", "15:41:22"),
    ("slurm/lab/8/0", "8", "cancelled", "CANCELLED by 0", 0, "15:37:15", "15:37:27"),
    ("slurm/lab/9/0", "5_1", "completed", "COMPLETED", 0, "15:37:09", "15:37:09"),
]
SIGNALS_WITH_STEPS = {"slurm/lab/4/0": 9, "slurm/lab/8/0": 15, "slurm/lab/12/0": 15, "slurm/lab/7/1": 15}


def attempts_of(*names: str, timezone: str = "UTC") -> tuple[pl.DataFrame, pl.DataFrame]:
    frames, rejects = [], []
    for name in names:
        rows, bad = parse_sacct((FIXTURES / name).read_text(), origin=name, timezone=timezone)
        frames.append(rows)
        rejects.append(bad)
    return build_attempts(merge_rows(frames), "lab"), pl.concat(rejects)


def as_tuples(attempts: pl.DataFrame) -> list[tuple]:
    return [
        (r["attempt_id"], r["job_id"], r["state"], r["raw_state"], r["exit_code"],
         r["start_ts"].strftime("%H:%M:%S"), r["end_ts"].strftime("%H:%M:%S"))
        for r in attempts.iter_rows(named=True)
    ]


@pytest.mark.parametrize("name", CORPUS)
def test_every_corpus_file_parses_to_valid_attempts(name):
    attempts, rejects = attempts_of(name)
    assert rejects.is_empty()
    assert attempts.columns == ATTEMPTS.names
    assert attempts["attempt_id"].is_unique().all()
    pl.from_arrow(attempts.to_arrow().cast(ATTEMPTS))  # every column fits the lake schema
    assert attempts["nodes"].to_list() == [["vm"]] * attempts.height


@pytest.mark.parametrize("name", ["parsable2_all_steps_D.txt", "parsable2_alloc_D.txt"])
def test_parsable2_rows_match_the_lab_session(name):
    attempts, _ = attempts_of(name)
    assert as_tuples(attempts) == EXPECTED


def test_steps_supply_the_signal_of_cancelled_and_timed_out_jobs():
    with_steps, _ = attempts_of("parsable2_all_steps_D.txt")
    signals = dict(zip(with_steps["attempt_id"], with_steps["signal"]))
    assert {k: v for k, v in signals.items() if v is not None} == SIGNALS_WITH_STEPS
    alloc_only, _ = attempts_of("parsable2_alloc_D.txt")  # -X: only the 0:9 on the job line
    assert {k: v for k, v in zip(alloc_only["attempt_id"], alloc_only["signal"]) if v} == {"slurm/lab/4/0": 9}


def test_a_step_begun_after_every_earlier_one_ended_is_a_relaunch():
    """Job 3 ran ``srun hostname`` then ``srun bash`` one after the other (the lab's real
    sacct output): the second step is a relaunch; no other job ran two steps."""
    attempts, _ = attempts_of("parsable2_all_steps_D.txt")
    relaunched = attempts.filter(pl.col("relaunch_ts").is_not_null()).select("attempt_id", "relaunch_ts").rows()
    assert relaunched == [("slurm/lab/3/0", [utc("15:37:06")])]


def test_overlapping_steps_and_a_step_after_a_running_one_are_no_relaunch():
    text = """JobID|JobIDRaw|JobName|State|ExitCode|Start|End|NodeList
20|20|ray|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T12:00:00|n[1-2]
20.0|20.0|ray-head|FAILED|1:0|2026-11-30T10:00:01|2026-11-30T12:00:00|n1
20.1|20.1|ray-worker|FAILED|1:0|2026-11-30T10:00:06|2026-11-30T12:00:00|n2
21|21|loop|RUNNING|0:0|2026-11-30T10:00:00|Unknown|n3
21.0|21.0|train|RUNNING|0:0|2026-11-30T10:00:01|Unknown|n3
21.1|21.1|probe|COMPLETED|0:0|2026-11-30T10:30:00|2026-11-30T10:30:02|n3
22|22|loop|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T12:00:00|n4
22.0|22.0|train|FAILED|1:0|2026-11-30T10:00:01|2026-11-30T10:20:00|n4
22.1|22.1|train|FAILED|1:0|2026-11-30T10:20:30|2026-11-30T11:00:00|n4
22.2|22.2|train|FAILED|1:0|2026-11-30T11:00:30|2026-11-30T12:00:00|n4
"""
    rows, _ = parse_sacct(text, origin="steps", timezone="UTC")
    attempts = build_attempts(merge_rows([rows]), "lab")
    relaunch = dict(zip(attempts["job_id"], attempts["relaunch_ts"].to_list(), strict=True))
    assert relaunch == {"20": None, "21": None, "22": [utc("10:20:30"), utc("11:00:30")]}


def test_requeued_attempts_are_numbered_by_start_not_file_order():
    attempts, _ = attempts_of("parsable2_all_steps_D.txt")
    job7 = attempts.filter(pl.col("job_id") == "7")
    # the TIMEOUT run is listed last in the file but the NODE_FAIL run started first
    assert job7.select("attempt_index", "state").rows() == [(0, "node_fail"), (1, "timeout")]


def test_a_row_repeated_whole_in_one_dump_is_one_run_not_a_requeue():
    text = (FIXTURES / "parsable2_all_steps_D.txt").read_text()
    doubled = text + "".join(text.splitlines(keepends=True)[1:10])
    rows, _ = parse_sacct(doubled, origin="doubled", timezone="UTC")
    attempts = build_attempts(merge_rows([rows]), "lab")
    assert as_tuples(attempts) == as_tuples(attempts_of("parsable2_all_steps_D.txt")[0])


def test_json_22_05_exit_codes_are_unknown_except_completed_and_signals():
    attempts, _ = attempts_of("sacct_json_all.json")
    by_id = {r["attempt_id"]: r for r in attempts.iter_rows(named=True)}
    for attempt_id, _job, state, _raw, _code, start, end in EXPECTED:
        row = by_id[attempt_id]
        assert (row["state"], row["start_ts"], row["end_ts"]) == (state, utc(start), utc(end))
    assert by_id["slurm/lab/2/0"]["exit_code"] is None  # `exit 3` reported as 0 by 22.05
    assert by_id["slurm/lab/6/0"]["exit_code"] is None  # exit 75 before the requeue, same
    assert (by_id["slurm/lab/4/0"]["exit_code"], by_id["slurm/lab/4/0"]["signal"]) == (0, 9)
    assert by_id["slurm/lab/1/0"]["exit_code"] == 0
    assert by_id["slurm/lab/8/0"]["raw_state"] == "CANCELLED by root"


def test_parsable2_and_json_together_take_exit_codes_from_parsable2():
    attempts, _ = attempts_of("sacct_json_all.json", "parsable2_alloc_D.txt")
    assert as_tuples(attempts) == EXPECTED
    step_counts = attempts.filter(pl.col("job_id") == "3")["ranks_per_node"].to_list()
    assert step_counts == [1]  # from the JSON steps (tasks.count / nodes.count)


def test_json_24_05_shape():
    attempts, rejects = attempts_of("sacct_json_24.05_handmade.json")
    assert rejects.is_empty()
    rows = {r["attempt_id"]: r for r in attempts.iter_rows(named=True)}
    assert set(rows) == {f"slurm/lab/{j}" for j in ("101/0", "102/0", "103/0", "104/0", "104/1", "106/0")}
    train = rows["slurm/lab/101/0"]
    assert (train["state"], train["exit_code"], train["signal"]) == ("failed", 1, None)
    assert train["nodes"] == ["gpu01", "gpu02"] and train["n_nodes"] == 2
    assert (train["ranks_per_node"], train["gpus_per_node"]) == (8, 8)  # srun step 16 tasks / 2 nodes
    assert train["start_ts"] == datetime(2025, 1, 1, 10, 1, tzinfo=timezone.utc)
    assert rows["slurm/lab/102/0"]["job_id"] == "100_3"
    cancelled = rows["slurm/lab/103/0"]
    assert (cancelled["raw_state"], cancelled["signal"]) == ("CANCELLED by alice", 15)
    assert [rows[f"slurm/lab/104/{i}"]["state"] for i in (0, 1)] == ["node_fail", "completed"]
    assert rows["slurm/lab/106/0"]["state"] == "out_of_memory"  # FAILED job, OOM batch step
    assert "slurm/lab/105/0" not in rows  # pending: no attempt yet


def test_parsable2_times_are_read_in_the_slurm_host_zone():
    berlin, _ = attempts_of("parsable2_alloc_D.txt", timezone="Europe/Berlin")
    assert berlin.filter(pl.col("attempt_id") == "slurm/lab/1/0")["start_ts"][0] == utc("14:37:03")
    summer = "JobID|JobIDRaw|State|ExitCode|Start|End\n1|1|COMPLETED|0:0|2026-07-01T12:00:00|Unknown\n"
    rows, _ = parse_sacct(summer, origin="x", timezone="America/New_York")
    attempt = build_attempts(rows, "c").row(0, named=True)
    assert attempt["start_ts"] == datetime(2026, 7, 1, 16, tzinfo=timezone.utc)  # EDT = UTC-4
    assert attempt["end_ts"] is None


def test_hostlists_none_assigned_pending_and_gpus():
    text = (
        "JobID|JobIDRaw|JobName|State|ExitCode|Start|End|NodeList|AllocNodes|NTasks|AllocTRES\n"
        "20|20|big|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T11:00:00|gpu-[001-002],cpu7|3||billing=3,gres/gpu=24,node=3\n"
        "20.0|20.0|python|FAILED|1:0|2026-11-30T10:00:05|2026-11-30T11:00:00|gpu-[001-002],cpu7|3|24|\n"
        "21|21|never|CANCELLED by 1000|0:0|Unknown|2026-11-30T10:05:00|None assigned|0||\n"
        "22|22|queued|PENDING|0:0|Unknown|Unknown|None assigned|0||\n"
        "23_[4-9]|23|arr|PENDING|0:0|Unknown|Unknown|None assigned|0||\n"
    )
    rows, rejects = parse_sacct(text, origin="x", timezone="UTC")
    attempts = {r["job_id"]: r for r in build_attempts(rows, "c").iter_rows(named=True)}
    assert rejects.is_empty() and set(attempts) == {"20", "21"}
    big = attempts["20"]
    assert big["nodes"] == ["gpu-001", "gpu-002", "cpu7"]
    assert (big["n_nodes"], big["ranks_per_node"], big["gpus_per_node"]) == (3, 8, 8)
    never = attempts["21"]
    assert (never["state"], never["nodes"], never["n_nodes"], never["start_ts"]) == ("cancelled", [], 0, None)


def test_malformed_rows_go_to_rejects_with_the_reason():
    text = (
        "JobID|JobIDRaw|JobName|State|ExitCode|Start|End\n"
        "1|1|ok|COMPLETED|0:0|2026-11-30T10:00:00|2026-11-30T10:01:00\n"
        "2|2|a|b|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T10:01:00\n"
        "3|3|bad|FAILED|1:0|yesterday|2026-11-30T10:01:00\n"
        "x|x|bad|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T10:01:00\n"
        "6|6|odd|WEIRD_STATE_X|0:0|2026-11-30T10:00:00|2026-11-30T10:01:00\n"
    )
    rows, rejects = parse_sacct(text, origin="/data/sacct.txt", timezone="UTC")
    assert build_attempts(rows, "c")["job_id"].to_list() == ["1"]
    assert rejects["origin"].to_list() == [f"/data/sacct.txt:{n}" for n in (3, 4, 5, 6)]
    reasons = rejects["reason"].to_list()
    assert reasons[0] == "expected 7 '|'-separated fields, found 8"
    assert reasons[1] == "unparseable Start time 'yesterday'"
    assert reasons[2] == "JobIDRaw 'x' is not a job id"
    assert reasons[3] == "State 'WEIRD_STATE_X' is not a Slurm job state"
    assert rejects["raw"][0].startswith("2|2|a|b|")


@pytest.mark.parametrize(
    ("nodelist", "problem"),
    [
        ("gpu[001-0x3]", "invalid hostlist 'gpu[001-0x3]' at position 4: invalid range '001-0x3'"),
        ("gpu[001-003", "invalid hostlist 'gpu[001-003' at position 3: '[' is never closed"),
    ],
)
def test_a_malformed_nodelist_sends_its_row_to_rejects(tmp_path, nodelist, problem):
    """Expanding it failed the whole connector, naming neither the file nor the line."""
    dump = tmp_path / "sacct.txt"
    dump.write_text(
        "JobID|JobIDRaw|JobName|State|ExitCode|Start|End|NodeList\n"
        "1|1|ok|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T11:00:00|gpu[001-003]\n"
        f"2|2|bad|FAILED|1:0|2026-11-30T10:00:00|2026-11-30T11:00:00|{nodelist}\n"
        f"2.0|2.0|python|FAILED|1:0|2026-11-30T10:00:05|2026-11-30T11:00:00|{nodelist}\n"
    )
    lake = Lake(tmp_path / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[dump]), "c"), None)
    assert (report.error, report.landed, report.rejected) == (None, 1, 2)
    assert lake.scan("attempts").collect()["nodes"].to_list() == [["gpu001", "gpu002", "gpu003"]]
    rejects = lake.scan("rejects").collect().sort("origin")
    assert rejects["origin"].to_list() == [f"{dump}:3", f"{dump}:4"]
    assert all(reason.startswith(f"NodeList: {problem}") for reason in rejects["reason"])


def test_a_malformed_json_nodes_sends_its_job_to_rejects():
    doc = json.loads((FIXTURES / "sacct_json_job2.json").read_text())
    doc["jobs"][0]["nodes"] = "vm[1-"
    rows, rejects = parse_sacct(json.dumps(doc), origin="x.json", timezone="UTC")
    assert rows.is_empty()
    assert rejects["origin"].to_list() == ["x.json#/jobs/0"]
    assert rejects["reason"][0].startswith("nodes: invalid hostlist 'vm[1-' at position 2")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("JobID|JobName\n1|x\n", "lacks field(s) ['State', 'Start', 'End']"),
        ('{"meta": {}, "jobs": [', "not valid JSON at line 1"),
        ('{"meta": {}, "errors": []}', "no 'jobs' list"),
    ],
)
def test_malformed_input_is_a_clear_error(text, message):
    with pytest.raises(ConnectorError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_sacct(text, origin="x", timezone="UTC")


def test_connector_lands_files_idempotently(tmp_path):
    lake = Lake(tmp_path / "lake")
    options = SlurmOptions(sacct_file=[FIXTURES / "parsable2_all_steps_D.txt", FIXTURES / "sacct_json_all.json"])
    report = run_connector(lake, SlurmConnector(options, "lab"), None)
    assert (report.error, report.landed, report.rejected) == (None, 14, 0)
    assert report.fetched == 30 + 30  # 16 jobs + 14 steps in each file
    first = lake.scan("attempts").collect().sort("attempt_id")
    run_connector(lake, SlurmConnector(options, "lab"), None)
    assert lake.scan("attempts").collect().sort("attempt_id").equals(first)
    assert first["exit_code"].to_list() == [e[4] for e in sorted(EXPECTED)]


def test_a_byte_order_mark_before_the_header_is_ignored(tmp_path):
    dump = tmp_path / "sacct.txt"
    dump.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "parsable2_all_steps_D.txt").read_bytes())
    lake = Lake(tmp_path / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[dump]), "lab"), None)
    assert (report.error, report.landed, report.rejected) == (None, 14, 0)
    assert as_tuples(lake.scan("attempts").collect().sort("attempt_id")) == sorted(EXPECTED)


def test_a_gzip_dump_is_read_like_the_plain_file(tmp_path):
    dump = tmp_path / "sacct.txt.gz"
    dump.write_bytes(gzip.compress((FIXTURES / "parsable2_all_steps_D.txt").read_bytes()))
    lake = Lake(tmp_path / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[dump]), "lab"), None)
    assert (report.error, report.landed, report.rejected) == (None, 14, 0)
    assert as_tuples(lake.scan("attempts").collect().sort("attempt_id")) == sorted(EXPECTED)


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_corrupt_gzip_dump_is_a_clear_error_naming_the_file(tmp_path, damage):
    data = bytearray(gzip.compress((FIXTURES / "parsable2_all_steps_D.txt").read_bytes()))
    if damage == "flipped":
        data[20:60] = bytes(b ^ 0xFF for b in data[20:60])
    else:
        data = data[: len(data) // 2]
    dump = tmp_path / "sacct.txt.gz"
    dump.write_bytes(bytes(data))
    lake = Lake(tmp_path / "lake")
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[dump]), "lab"), None)
    assert report.error.startswith(f"slurm: {dump}: corrupt gzip data (")
    assert report.error.endswith("; re-copy the file")
    assert report.landed == 0 and lake.files("attempts") == []


def test_sacct_command_is_one_windowed_call_with_steps_and_duplicates():
    window = FetchWindow(datetime(2026, 11, 30, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
    cmd = SlurmConnector(SlurmOptions(requeue_lookback_days=2, extra_args=["-M", "prod"]), "prod").sacct_command(window)
    assert cmd[:4] == ["sacct", "-a", "-D", "--parsable2"] and "-X" not in cmd
    assert cmd[cmd.index("-S") + 1] == "2026-11-28T00:00:00" and cmd[cmd.index("-E") + 1] == "2026-12-01T00:00:00"
    assert cmd[-2:] == ["-M", "prod"]


def test_missing_sacct_binary_is_a_connector_error(tmp_path):
    window = FetchWindow(datetime(2026, 11, 30, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
    connector = SlurmConnector(SlurmOptions(sacct_bin=str(tmp_path / "no-sacct")), "c")
    report = run_connector(Lake(tmp_path / "lake"), connector, window)
    assert "not found; install the Slurm client or set sacct_bin" in report.error
    assert not report.transient and report.landed == 0


def test_options_reject_unknown_zone_and_fields():
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Base'"):
        SlurmOptions(timezone="Mars/Base")
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        SlurmOptions(sacct_binary="x")


def test_an_end_in_the_repeated_autumn_hour_is_read_by_the_elapsed_time():
    """02:40:20 on 27 October 2024 happened twice in Berlin. A job that started at 01:55
    CEST and ran 1:45:20 ended at the second one (CET); one that ran 0:45:20, at the first.
    Without Elapsed the earlier instant is taken, as before."""
    header = "JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES"
    text = "\n".join([header,
                      "41|41|train|u|FAILED|1:0|2024-10-27T01:55:00|2024-10-27T02:40:20|01:45:20|n1|gres/gpu=8,node=1",
                      "42|42|train|u|FAILED|1:0|2024-10-27T01:55:00|2024-10-27T02:40:20|00:45:20|n1|gres/gpu=8,node=1",
                      "43|43|train|u|FAILED|1:0|2024-10-27T01:55:00|2024-10-27T02:40:20||n1|gres/gpu=8,node=1"])
    rows, bad = parse_sacct(text, origin="dst", timezone="Europe/Berlin")
    assert bad.is_empty()
    ends = {r["job_id"]: r["end_ts"].isoformat() for r in rows.to_dicts()}
    assert ends == {"41": "2024-10-27T01:40:20+00:00", "42": "2024-10-27T00:40:20+00:00",
                    "43": "2024-10-27T00:40:20+00:00"}


def test_a_start_in_the_repeated_autumn_hour_is_never_before_the_submission():
    """01:05 on 1 November 2026 happened twice in Chicago (CDT, then CST). A job submitted
    at 01:58:10 (CDT: the first pass, the only one that leaves 01:05 after it) started at
    the second 01:05, and ran 27 s from there; one submitted at 00:50 started at the first."""
    header = "JobID|JobIDRaw|JobName|User|Submit|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES"
    text = "\n".join([
        header,
        "51|51|t|u|2026-11-01T01:58:10|FAILED|1:0|2026-11-01T01:05:00|2026-11-01T01:05:27|00:00:27|n1|gres/gpu=8,node=1",
        "52|52|t|u|2026-11-01T00:50:00|FAILED|1:0|2026-11-01T01:05:00|2026-11-01T01:05:27|00:00:27|n1|gres/gpu=8,node=1",
        # An Elapsed a second off (rounded elsewhere): the end still cannot precede the start.
        "53|53|t|u|2026-11-01T01:58:10|FAILED|1:0|2026-11-01T01:05:00|2026-11-01T01:05:27|00:00:28|n1|gres/gpu=8,node=1",
    ])
    rows, bad = parse_sacct(text, origin="dst", timezone="America/Chicago")
    assert bad.is_empty()
    spans = {r["job_id"]: (r["start_ts"].isoformat(), r["end_ts"].isoformat()) for r in rows.to_dicts()}
    assert spans == {"51": ("2026-11-01T07:05:00+00:00", "2026-11-01T07:05:27+00:00"),
                     "52": ("2026-11-01T06:05:00+00:00", "2026-11-01T06:05:27+00:00"),
                     "53": ("2026-11-01T07:05:00+00:00", "2026-11-01T07:05:27+00:00")}


def test_a_start_in_the_repeated_autumn_hour_is_read_by_the_end_less_the_elapsed_time():
    """A job submitted at 01:39:30 (Chicago, 1 November 2026: the submission repeats too, so
    it settles nothing) started at 01:40 and ended at 02:10 CST after 30 minutes: it
    started at the second 01:40. One that ran 1:30 from 01:40 started at the first; one
    whose end is in the repeated hour too keeps the earlier reading of both."""
    header = "JobID|JobIDRaw|JobName|User|Submit|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES"
    text = "\n".join([
        header,
        "61|61|t|u|2026-11-01T01:39:30|FAILED|1:0|2026-11-01T01:40:00|2026-11-01T02:10:00|00:30:00|n1|gres/gpu=8,node=1",
        "62|62|t|u|2026-11-01T01:39:30|FAILED|1:0|2026-11-01T01:40:00|2026-11-01T02:10:00|01:30:00|n1|gres/gpu=8,node=1",
        "63|63|t|u|2026-11-01T01:39:30|FAILED|1:0|2026-11-01T01:40:00|2026-11-01T01:50:00|00:10:00|n1|gres/gpu=8,node=1",
    ])
    rows, bad = parse_sacct(text, origin="dst", timezone="America/Chicago")
    assert bad.is_empty()
    spans = {r["job_id"]: (r["start_ts"].isoformat(), r["end_ts"].isoformat()) for r in rows.to_dicts()}
    assert spans == {"61": ("2026-11-01T07:40:00+00:00", "2026-11-01T08:10:00+00:00"),
                     "62": ("2026-11-01T06:40:00+00:00", "2026-11-01T08:10:00+00:00"),
                     "63": ("2026-11-01T06:40:00+00:00", "2026-11-01T06:50:00+00:00")}


def test_daily_dumps_that_each_list_some_runs_of_a_requeued_job_give_each_run_one_id(tmp_path):
    """A nightly landing of each day's saved dump: the day the job was requeued lists both
    of its runs, the next day only the run that went on past midnight, the day after a run
    the others never listed. Each run keeps one attempt id, whatever each dump numbers."""
    header = "JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES\n"
    first = "70223|70223|train|alice|NODE_FAIL|0:0|2026-11-10T15:30:00|2026-11-10T16:45:02|n[21-23]|gres/gpu=24,node=3\n"
    second = "70223|70223|train|alice|COMPLETED|0:0|2026-11-10T23:10:00|2026-11-11T03:30:18|n[3-5]|gres/gpu=24,node=3\n"
    third = "70223|70223|train|alice|FAILED|1:0|2026-11-12T01:00:00|2026-11-12T02:00:00|n[6-8]|gres/gpu=24,node=3\n"
    lake = Lake(tmp_path / "lake")
    for day, rows in (("10", first + second), ("11", second), ("12", third)):
        dump = tmp_path / f"sacct-{day}.txt"
        dump.write_text(header + rows)
        report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[dump], timezone="UTC"), "c1"), None)
        assert report.error is None, report.error
    got = lake.scan("attempts").select("attempt_id", "state", "start_ts").sort("attempt_id").collect()
    assert got["attempt_id"].to_list() == ["slurm/c1/70223/0", "slurm/c1/70223/1", "slurm/c1/70223/2"]
    assert got["state"].to_list() == ["node_fail", "completed", "failed"]
    # An older dump landed late (a run before the stored ones): the fetch's numbers stand,
    # and the landing does not fail on a repeated id.
    older = tmp_path / "sacct-09.txt"
    older.write_text(header + "70223|70223|train|alice|FAILED|1:0|2026-11-09T10:00:00|2026-11-09T11:00:00|n1|gres/gpu=8,node=1\n"
                     + first)
    report = run_connector(lake, SlurmConnector(SlurmOptions(sacct_file=[older], timezone="UTC"), "c1"), None)
    assert report.error is None, report.error
    assert lake.scan("attempts").select(pl.len()).collect().item() == 3
