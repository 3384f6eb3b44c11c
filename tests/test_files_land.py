"""Landing log files: attempts, rank → node, idempotence, accounting, bad inputs.

Fixture lines are verbatim from /work/shared/corpus (URL beside each, or in
test_files_parsers.py for the files under tests/fixtures/logs).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from ingest.files import FilesError, land_log_files
from ingest.lake import Lake
from ingest.schema import ATTEMPTS

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
UTC = timezone.utc
CLUSTER = "c1"

# (line, source URL)
WATCHDOG_R3 = ("[rank3]:[E1206 18:44:13.275158817 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.",
               "https://github.com/hiyouga/LlamaFactory/issues/6269")
OOM_KILL = ("slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
            "https://github.com/hafs-community/HAFS/issues/101")
SYSLOG_LINE = ("Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT",
               "https://github.com/leptonai/gpud/pull/1209")


def ts(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def land_attempts(lake: Lake, rows: list[dict]) -> None:
    base = {name: None for name in ATTEMPTS.names}
    frame = pl.DataFrame(
        [base | {"scheduler": "slurm", "state": "failed"} | r for r in rows],
        schema=pl.from_arrow(ATTEMPTS.empty_table()).schema,
    )
    lake.land("attempts", frame, cluster=CLUSTER)


def observations(lake: Lake) -> pl.DataFrame:
    return lake.scan("observations").collect().sort("input_id", "seq")


def test_slurm_output_is_tied_to_its_attempt_with_ranks_on_nodes(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [{
        "attempt_id": "slurm/c1/4242/0", "job_id": "4242", "attempt_index": 0,
        "start_ts": ts(2026, 12, 6, 18, 0), "end_ts": ts(2026, 12, 6, 19, 0),
        "nodes": ["gpu-a", "gpu-b"], "n_nodes": 2, "ranks_per_node": 4,
    }])
    report = land_log_files(lake, [FIXTURES / "slurm-4242.out"], cluster=CLUSTER, year=2026)
    assert report.files[0].attempt_ids == ("slurm/c1/4242/0",)
    obs = observations(lake)
    assert set(obs["attempt_id"]) == {"slurm/c1/4242/0"}
    assert set(obs["source"]) == {"app"}
    # rank 0 → gpu-a, ranks 4 and 7 → gpu-b (block of 4); the NCCL host prefix wins for rank 5
    assert obs["node"].to_list() == [None, "gpu-a", "gpu-b", "kp-ddp-worker-0", "gpu-b", None, None]


def test_requeued_job_picks_the_attempt_holding_the_lines_else_the_last(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        {"attempt_id": "slurm/c1/77/0", "job_id": "77", "attempt_index": 0,
         "start_ts": ts(2026, 12, 6, 17, 0), "end_ts": ts(2026, 12, 6, 18, 0),
         "nodes": ["gpu-a"], "n_nodes": 1, "ranks_per_node": 8},
        {"attempt_id": "slurm/c1/77/1", "job_id": "77", "attempt_index": 1,
         "start_ts": ts(2026, 12, 6, 18, 30), "end_ts": ts(2026, 12, 6, 19, 0),
         "nodes": ["gpu-c"], "n_nodes": 1, "ranks_per_node": 8},
    ])
    first = tmp_path / "first" / "slurm-77.out"
    first.parent.mkdir()
    first.write_text("[rank3]:[E1206 17:10:00.000000001 ProcessGroupNCCL.cpp:607] " + WATCHDOG_R3[0].split("] ", 1)[1] + "\n")
    stampless = tmp_path / "stampless" / "slurm-77.out"
    stampless.parent.mkdir()
    stampless.write_text(OOM_KILL[0] + "\n")
    report = land_log_files(lake, [first, stampless], cluster=CLUSTER, year=2026)
    assert [f.attempt_ids for f in report.files] == [("slurm/c1/77/0",), ("slurm/c1/77/1",)]
    obs = observations(lake)
    assert obs.filter(pl.col("attempt_id") == "slurm/c1/77/0")["node"].to_list() == ["gpu-a"]
    # no stamp anywhere in the file: the line is dated at the attempt start, not ingest
    late = obs.filter(pl.col("attempt_id") == "slurm/c1/77/1").row(0, named=True)
    assert (late["ts"], late["ts_source"]) == (ts(2026, 12, 6, 18, 30), "inferred")


def test_attempt_and_node_options_override(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [{
        "attempt_id": "static/c1/train/0", "job_id": "train", "start_ts": ts(2026, 12, 6, 18),
        "nodes": ["gpu-x", "gpu-y"], "n_nodes": 2, "gpus_per_node": 2,
    }])
    log = tmp_path / "rank.log"
    log.write_text(WATCHDOG_R3[0] + "\n")
    land_log_files(lake, [log], cluster=CLUSTER, attempt_id="static/c1/train/0", year=2026)
    row = observations(lake).row(0, named=True)
    assert (row["attempt_id"], row["rank"], row["node"]) == ("static/c1/train/0", 3, "gpu-y")
    land_log_files(lake, [log], cluster=CLUSTER, attempt_id="static/c1/train/0", node="gpu-z", year=2026)
    assert observations(lake)["node"].to_list() == ["gpu-z"]


def test_relanding_is_idempotent_and_every_line_is_accounted_for(tmp_path):
    lake = Lake(tmp_path / "lake")
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    (logs / "nested").mkdir()
    (logs / "nested" / "messages").write_text(SYSLOG_LINE[0] + "\nnot a syslog line\n\n")
    report = land_log_files(lake, [logs], cluster=CLUSTER, year=2026, node="gpu-9")
    assert [Path(f.path).name for f in report.files] == ["dmesg-gpu.txt", "messages", "slurm-4242.out"]
    listing = sorted(p.relative_to(lake.root) for p in lake.root.rglob("*.parquet"))
    obs_count = lake.scan("observations").collect().height
    rejects = lake.scan("rejects").collect()
    assert report.read == 6 + 7 + 2 == obs_count + rejects.height
    assert (report.landed, report.rejected) == (obs_count, rejects.height)
    assert set(rejects["source"]) == {"kmsg", "syslog"}

    again = land_log_files(lake, [logs], cluster=CLUSTER, year=2026, node="gpu-9")
    assert sorted(p.relative_to(lake.root) for p in lake.root.rglob("*.parquet")) == listing
    assert lake.scan("observations").collect().height == obs_count
    assert lake.scan("rejects").collect().height == rejects.height
    assert (again.read, again.landed, again.rejected) == (report.read, report.landed, report.rejected)


def test_bad_inputs_fail_before_anything_lands(tmp_path):
    lake = Lake(tmp_path / "lake")
    good = FIXTURES / "slurm-4242.out"
    (tmp_path / "empty").mkdir()
    cases = [
        ([good, tmp_path / "missing.log"], {}, r"missing\.log: no such file or directory; check the path"),
        ([good, tmp_path / "empty"], {}, r"empty: directory holds no files"),
        ([good], {"source": "dmseg"}, r"unknown source 'dmseg'"),
        ([good], {"source": "zzz"}, r"unknown source 'zzz'\. Valid sources: app, journald, kmsg, kubectl, syslog\."),
        ([], {}, r"no input paths given"),
    ]
    for paths, options, message in cases:
        with pytest.raises(FilesError, match=message):
            land_log_files(lake, paths, cluster=CLUSTER, **options)
    assert not lake.root.exists()


def test_appended_output_of_a_requeued_job_is_split_by_attempt(tmp_path):
    """With ``--open-mode=append`` (or ``JobFileAppend=1``) one ``slurm-%j.out`` holds every
    attempt of a requeued job: each line goes to the attempt that had started by then."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        {"attempt_id": "slurm/c1/88/0", "job_id": "88", "attempt_index": 0,
         "start_ts": ts(2026, 12, 6, 17, 0), "end_ts": ts(2026, 12, 6, 18, 0),
         "nodes": ["gpu-a"], "n_nodes": 1, "ranks_per_node": 8},
        {"attempt_id": "slurm/c1/88/1", "job_id": "88", "attempt_index": 1,
         "start_ts": ts(2026, 12, 6, 18, 30), "end_ts": ts(2026, 12, 6, 19, 0),
         "nodes": ["gpu-c"], "n_nodes": 1, "ranks_per_node": 8},
    ])
    out = tmp_path / "slurm-88.out"
    body = WATCHDOG_R3[0].split("] ", 1)[1]
    out.write_text(
        f"[rank3]:[E1206 17:10:00.000000001 ProcessGroupNCCL.cpp:607] {body}\n"
        "unstamped line of the first attempt\n"
        f"[rank3]:[E1206 18:40:00.000000001 ProcessGroupNCCL.cpp:607] {body}\n"
    )
    report = land_log_files(lake, [out], cluster=CLUSTER, year=2026)
    assert report.files[0].attempt_ids == ("slurm/c1/88/0", "slurm/c1/88/1")
    obs = observations(lake).sort("seq")
    assert obs["attempt_id"].to_list() == ["slurm/c1/88/0", "slurm/c1/88/0", "slurm/c1/88/1"]
    assert obs["node"].to_list() == ["gpu-a", None, "gpu-c"]
