"""Landing log files: attempts, rank → node, idempotence, accounting, bad inputs.

Fixture lines are verbatim from the shared corpus (``shared/corpus`` beside the repository;
URL beside each, or in test_files_parsers.py for the files under tests/fixtures/logs).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from ingest.files import FilesError, land_log_files
from ingest.lake import Lake, LakeError
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


def run_of(attempt_id: str, job_id: str, start: datetime, end: datetime, nodes: list[str], ranks_per_node: int,
           index: int = 0) -> dict:
    """An attempt row: ``attempt_id`` of ``job_id`` (its ``index``-th run) on ``nodes``."""
    return {"attempt_id": attempt_id, "job_id": job_id, "attempt_index": index, "start_ts": start, "end_ts": end,
            "nodes": nodes, "n_nodes": len(nodes), "ranks_per_node": ranks_per_node}


def job_4242(start: datetime, end: datetime) -> dict:
    """The attempt ``slurm-4242.out`` belongs to: two nodes, four ranks on each."""
    return run_of("slurm/c1/4242/0", "4242", start, end, ["gpu-a", "gpu-b"], 4)


def observations(lake: Lake) -> pl.DataFrame:
    return lake.scan("observations").collect().sort("input_id", "seq")


def test_slurm_output_is_tied_to_its_attempt_with_ranks_on_nodes(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0))])
    report = land_log_files(lake, [FIXTURES / "slurm-4242.out"], cluster=CLUSTER, year=2026)
    assert report.files[0].attempt_ids == ("slurm/c1/4242/0",)
    obs = observations(lake)
    assert set(obs["attempt_id"]) == {"slurm/c1/4242/0"}
    assert set(obs["source"]) == {"app"}
    # rank 0 → gpu-a, rank 4 → gpu-b (block of 4); rank 5's NCCL host prefix names a host the
    # attempt does not know (a pod's name), so its rank places it, on gpu-b;
    # ``[default7]:`` is torchrun's local rank 7, which either node's torchrun prints.
    assert obs["node"].to_list() == [None, "gpu-a", "gpu-b", "gpu-b", None, None, None]
    assert obs["rank"].to_list() == [None, 0, 4, 5, None, None, None]


def test_a_slurm_stderr_file_is_tied_to_its_attempt_like_its_output(tmp_path):
    """``sbatch --output=slurm-%j.out --error=slurm-%j.err``: the stderr file, where the
    tracebacks go, names its job the same way."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "slurm-4242.err").write_text(f"4: {WATCHDOG_R3[0]}\n")
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0))])
    report = land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    assert report.files[0].attempt_ids == ("slurm/c1/4242/0",)
    assert observations(lake)["node"].to_list() == ["gpu-b"]


def test_a_torchrun_local_rank_under_an_srun_label_runs_on_the_labelled_node(tmp_path):
    """``srun --label torchrun --tee 3``: one torchrun per node, so srun's task id is the
    node's index and torchrun's ``[default<N>]:`` the local rank on it (PyTorch's TailLog
    names each worker's lines by its index on the node); a ``[rank<N>]:`` behind it is the
    global rank. Without the ranks per node the node is still known, the global rank not."""
    logs = tmp_path / "logs"
    logs.mkdir()
    error = "RuntimeError: CUDA error: unspecified launch failure"  # pytorch/pytorch#49832
    lines = [f"1: [default3]:{error}", f"0: [default2]:[rank2]:{error}", f"0: [default3]:{WATCHDOG_R3[0]}"]
    for job, per_node in (("4242", 4), ("4243", None)):
        (logs / f"slurm-{job}.out").write_text("\n".join(lines) + "\n")
    lake = Lake(tmp_path / "lake")
    start, end = ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0)
    land_attempts(lake, [job_4242(start, end), job_4242(start, end) | {
        "attempt_id": "slurm/c1/4243/0", "job_id": "4243", "ranks_per_node": None}])
    land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    obs = observations(lake)
    known = obs.filter(pl.col("attempt_id") == "slurm/c1/4242/0")
    assert known["node"].to_list() == ["gpu-b", "gpu-a", "gpu-a"]
    assert known["rank"].to_list() == [7, 2, 3]
    unknown = obs.filter(pl.col("attempt_id") == "slurm/c1/4243/0")
    assert unknown["node"].to_list() == ["gpu-b", "gpu-a", "gpu-a"]
    assert unknown["rank"].to_list() == [None, 2, 3]


def test_one_task_per_node_places_lines_by_the_task_id_and_counts_a_process_per_gpu(tmp_path):
    """``srun --ntasks-per-node=1 --label torchrun``: Slurm records one task per node, so the
    task id is the node's index and PyTorch's global ranks run eight to a node (one per
    GPU). Under ``torchrun --role rank --tee 3`` the first ``[rank1]:`` is torchrun's local
    rank and the second PyTorch's global one; the agent's own lines name no rank."""
    logs = tmp_path / "logs"
    logs.mkdir()
    error = "RuntimeError: CUDA error: unspecified launch failure"  # pytorch/pytorch#49832
    agent = ("W0216 09:21:19.020000 140895337689951 torch/distributed/elastic/multiprocessing/api.py:897] "
             "Sending process 813356 closing signal SIGTERM")
    lines = [f"2: [rank1]:[rank17]:{error}", f"0: {WATCHDOG_R3[0]}", f"1: [default3]:{error}", f"3: {agent}"]
    (logs / "slurm-4244.out").write_text("\n".join(lines) + "\n")
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0)) | {
        "attempt_id": "slurm/c1/4244/0", "job_id": "4244", "nodes": ["gpu-a", "gpu-b", "gpu-c", "gpu-d"],
        "n_nodes": 4, "ranks_per_node": 1, "gpus_per_node": 8}])
    land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    obs = observations(lake)
    assert obs["node"].to_list() == ["gpu-c", "gpu-a", "gpu-b", "gpu-d"]
    assert obs["rank"].to_list() == [17, 3, 11, None]


def test_srun_names_the_node_of_a_task_that_failed(tmp_path):
    """Without the tasks per node (a sacct format with no NTasks) task 2 would be placed by
    the GPUs per node; srun's own report says where it ran, for every task it lists."""
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = ["2: OSError: [Errno 5] Input/output error", "5: RuntimeError: CUDA error: unspecified launch failure",
             "srun: error: lyra-g52: task 2: Exited with exit code 1",  # hafs-community/HAFS#101 form
             "srun: error: lyra-g53: tasks 4-5,7: Terminated", "1: loss 0.25"]
    (logs / "slurm-4245.out").write_text("\n".join(lines) + "\n")
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0)) | {
        "attempt_id": "slurm/c1/4245/0", "job_id": "4245", "nodes": ["lyra-g50", "lyra-g51", "lyra-g52", "lyra-g53"],
        "n_nodes": 4, "ranks_per_node": None, "gpus_per_node": 4}])
    land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    assert observations(lake)["node"].to_list() == ["lyra-g52", "lyra-g53", None, None, "lyra-g50"]


def test_a_host_name_the_attempt_does_not_know_yields_to_where_the_task_ran(tmp_path):
    """NCCL's prefix is the host's own name (``gethostname``, cut at the first dot), which
    need not be Slurm's name for the node (an old hostname kept after a rename): a line
    naming a host the attempt did not run on is placed by its task id. A host that is one
    of the attempt's nodes is kept, even where the task id says otherwise."""
    logs = tmp_path / "logs"
    logs.mkdir()
    port_error = "NCCL WARN NET/IB : Got async event : port error"  # NVIDIA/nccl src/transport/net_ib.cc
    lines = [f"6: ml-node-23:77110:77342 [2] {port_error}", f"1: gpu-b:6501:6612 [1] {port_error}"]
    (logs / "slurm-4247.out").write_text("\n".join(lines) + "\n")
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0)) | {
        "attempt_id": "slurm/c1/4247/0", "job_id": "4247"}])
    land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    assert observations(lake)["node"].to_list() == ["gpu-b", "gpu-b"]


def test_lines_before_a_files_first_stamp_date_from_the_attempts_start(tmp_path):
    """NCCL prints no stamps: its warning, before the output's first stamped line (the
    watchdog half an hour later), was printed at some moment since the attempt started,
    not at that stamp."""
    logs = tmp_path / "logs"
    logs.mkdir()
    warn = "1: tg022:77110:77342 [1] NCCL WARN NET/IB : Got async event : port error"  # NVIDIA/nccl form
    (logs / "slurm-4246.out").write_text(f"{warn}\n  0: {WATCHDOG_R3[0]}\n")
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0)) | {
        "attempt_id": "slurm/c1/4246/0", "job_id": "4246"}])
    land_log_files(lake, [logs], cluster=CLUSTER, year=2026)
    obs = observations(lake)
    assert obs.select("ts", "ts_source").rows() == [
        (ts(2026, 12, 6, 18, 0), "inferred"), (ts(2026, 12, 6, 18, 44, 13, 275158), "line")]


@pytest.mark.parametrize(("year", "landed_year"), [(2025, 2026), (2027, 2026), (None, 2026)])
def test_a_job_output_dated_in_the_wrong_year_moves_to_its_jobs_year(tmp_path, year, landed_year):
    """glog stamps have no year: a copied output (mtime today) or a wrong --year puts them
    whole years away from the job the file is named after; they move to the job's year.
    slurmstepd's banner carries its own year (the fixture's is from another job, in 2020):
    no whole-year move brings it into the run, so it keeps its stamp."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0))])
    copied = shutil.copy(FIXTURES / "slurm-4242.out", tmp_path / "slurm-4242.out")  # mtime: now
    land_log_files(lake, [copied], cluster=CLUSTER, year=year)
    stamped = observations(lake).filter(pl.col("ts_source") == "line")
    glog = stamped.filter(pl.col("program").fill_null("") != "slurmstepd")
    assert glog.height and {t.year for t in glog["ts"]} == {landed_year}
    assert {(t.month, t.day, t.hour) for t in glog["ts"]} == {(12, 6, 18)}
    banner = stamped.filter(pl.col("program") == "slurmstepd")
    assert banner["ts"].to_list() == [ts(2020, 7, 3, 2, 59, 56)]


def test_a_job_that_started_in_the_repeated_hour_printed_in_its_second_pass(tmp_path):
    """1 November 2026, Chicago: 01:00–02:00 happened twice. A job that started at 01:05
    CST (07:05 UTC, the second pass) stamps its glog lines 01:05–01:06 without a zone; read
    at their earlier instant (CDT) they would precede the job by an hour. They, and the
    unstamped traceback line under them, take the second pass. A stamp with an offset
    keeps its instant."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 11, 1, 7, 5), ts(2026, 11, 1, 7, 6))])
    out = tmp_path / "slurm-4242.out"
    out.write_text(
        "[rank0]:[E1101 01:05:20.000000001 ProcessGroupNCCL.cpp:607] [Rank 0] CUDA error: invalid device ordinal\n"
        "Traceback (most recent call last):\n"
        "[2026-11-01T01:05:21-05:00] rank 0 exiting\n")
    land_log_files(lake, [out], cluster=CLUSTER, year=2026, timezone="America/Chicago")
    got = observations(lake).sort("origin").select("ts", "ts_source").rows()
    assert got == [(ts(2026, 11, 1, 7, 5, 20), "line"), (ts(2026, 11, 1, 7, 5, 20), "inferred"),
                   (ts(2026, 11, 1, 6, 5, 21), "line")]


def test_a_job_output_weeks_away_from_its_job_keeps_its_stamps(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [job_4242(ts(2026, 11, 1, 18, 0), ts(2026, 11, 1, 19, 0))])
    land_log_files(lake, [FIXTURES / "slurm-4242.out"], cluster=CLUSTER, year=2026)
    stamped = observations(lake).filter(pl.col("ts_source") == "line")
    assert {(t.year, t.month, t.day) for t in stamped["ts"]} == {(2026, 12, 6), (2020, 7, 3)}  # + the banner


def test_requeued_job_picks_the_attempt_holding_the_lines_else_the_last(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        run_of("slurm/c1/77/0", "77", ts(2026, 12, 6, 17, 0), ts(2026, 12, 6, 18, 0), ["gpu-a"], 8),
        run_of("slurm/c1/77/1", "77", ts(2026, 12, 6, 18, 30), ts(2026, 12, 6, 19, 0), ["gpu-c"], 8, index=1),
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


# `dmesg -T` as gpud's testdata holds it: the line names no host.
DMESG_T = ("[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d",
           "https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/accelerator/"
           "nvidia/xid/testdata/dmesg-with-xid-119.log")


def test_lines_with_no_node_and_no_attempt_are_reported_unplaced(tmp_path):
    from typer.testing import CliRunner

    from engine.cli import app

    log = tmp_path / "dmesg.txt"
    log.write_text(DMESG_T[0] + "\n")
    report = land_log_files(Lake(tmp_path / "lake"), [log], cluster=CLUSTER)
    assert [(f.source, f.landed, f.unplaced) for f in report.files] == [("kmsg", 1, 1)]
    assert land_log_files(Lake(tmp_path / "lake"), [log], cluster=CLUSTER, node="gpu-a").files[0].unplaced == 0
    result = CliRunner().invoke(app, ["ingest", "files", str(log), "--lake", str(tmp_path / "cli"), "--cluster", CLUSTER])
    assert result.exit_code == 0
    assert f"warning: {log}: 1 of 1 lines (kmsg) name no node and tie to no attempt" in " ".join(result.output.split())


def test_landing_zoneless_stamps_without_a_timezone_says_they_were_read_as_utc(tmp_path):
    from typer.testing import CliRunner

    from engine.cli import app

    log = tmp_path / "dmesg.txt"
    log.write_text(DMESG_T[0] + "\n")
    land = ["ingest", "files", str(log), "--lake", str(tmp_path / "cli"), "--cluster", CLUSTER, "--node", "gpu-a"]
    note = "stamps without a zone were read as UTC"
    assert note in " ".join(CliRunner().invoke(app, land).output.split())
    given = CliRunner().invoke(app, [*land, "--timezone", "America/Chicago"])
    assert given.exit_code == 0 and note not in " ".join(given.output.split())
    # Every stamp carries its offset (rsyslog's RFC 3339 format): nothing was read as UTC.
    zoned = tmp_path / "syslog.log"
    zoned.write_text("2026-02-10T08:01:48.551000-06:00 gpu-a kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has "
                     "fallen off the bus.\n")
    report = land_log_files(Lake(tmp_path / "lake"), [log, zoned], cluster=CLUSTER, node="gpu-a")
    assert [(f.source, f.zoneless) for f in report.files] == [("kmsg", 1), ("syslog", 0)]
    quiet = CliRunner().invoke(app, ["ingest", "files", str(zoned), "--lake", str(tmp_path / "cli"), "--cluster", CLUSTER])
    assert quiet.exit_code == 0 and note not in " ".join(quiet.output.split())


@pytest.mark.parametrize(("source", "lines", "zoneless"), [
    ("syslog", [SYSLOG_LINE[0]], 1),
    ("syslog", ["2025-01-21T04:41:44.283390+00:00 gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT"], 0),
    ("kmsg", [DMESG_T[0]], 1),
    ("kmsg", ["kern  :warn  : 2025-01-21T04:41:44,283390+00:00 NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', "
              "name=<unknown>, Graphics Exception: ESR 0x546fb0=0x11f000e 0x546fb4=0x24 0x546fa8=0xf81eb60"], 0),
    ("kmsg", ["[   84.300451] NVRM: GPU6 _threadNodeCheckTimeout: Timeout was set to: 4000 msecs!"], 0),
    ("app", ["[E1130 15:32:38.123456 12345 ProcessGroupNCCL.cpp:1316] boom", "no stamp here"], 1),
    ("app", ["[2026-11-30 15:32:38,123] INFO step 1", "2026-11-30T15:32:39.5Z step 2"], 1),
    ("app", ["2026-11-30T15:32:39.5Z step 2", "2026-11-30T15:32:40+01:00 step 3"], 0),
])
def test_the_report_counts_the_lines_whose_stamp_carried_no_zone(tmp_path, source, lines, zoneless):
    """Only stamps without a zone (RFC 3164, ``dmesg -T``, glog, offset-less ISO) are read
    in the landing's zone; an offset, a monotonic stamp placed by the boot time, or no
    stamp at all is not."""
    log = tmp_path / "log.txt"
    log.write_text("".join(f"{line}\n" for line in lines))
    report = land_log_files(Lake(tmp_path / "lake"), [log], cluster=CLUSTER, source=source, node="gpu-1", year=2026,
                            boot_time=datetime(2026, 2, 1, tzinfo=timezone.utc))
    assert (report.files[0].landed, report.zoneless) == (len(lines), zoneless)


def test_an_output_landed_before_its_jobs_accounting_says_to_land_that_first(tmp_path):
    """A nightly collection can fetch a job's output before sacct lists the job: its lines
    tie to nothing, and the landing says what fixes it (not --node)."""
    from typer.testing import CliRunner

    from engine.cli import app

    output = tmp_path / "slurm-555.out"
    output.write_text("0: [2026-02-10 08:01:48,551] RuntimeError: boom\n")
    land = ["ingest", "files", str(output), "--lake", str(tmp_path / "cli"), "--cluster", CLUSTER]
    said = " ".join(CliRunner().invoke(app, land).output.split())
    assert f"warning: {output}: the lake has no attempt of this output's job yet" in said
    assert "--node-pattern or --attempt" not in said
    report = land_log_files(Lake(tmp_path / "lake"), [output], cluster=CLUSTER)
    assert [f.path for f in report.untied_outputs()] == [str(output)]


def test_lines_a_later_run_wrote_before_its_accounting_landed_are_reported(tmp_path):
    """A requeued job's output holds the next run's lines before sacct lists that run (it
    was pending when the nightly dump was taken): they tie to the run before, hours after
    it ended, and the landing says so and what fixes it."""
    from typer.testing import CliRunner

    from engine.cli import app
    from ingest.connectors import run_connector
    from ingest.connectors.slurm import SlurmConnector, SlurmOptions

    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList\n"
                     "556|556|train|alice|NODE_FAIL|0:0|2026-02-10T08:00:00|2026-02-10T09:00:00|gpu1\n")
    lake = tmp_path / "cli"
    assert run_connector(Lake(lake), SlurmConnector(SlurmOptions(sacct_file=[sacct], timezone="UTC"), CLUSTER),
                         None).error is None
    output = tmp_path / "slurm-556.out"
    output.write_text("0: [2026-02-10 08:30:00,000] step 10\n0: [2026-02-10 08:59:00,000] step 20\n"
                      "0: [2026-02-10 21:00:00,000] step 0\n"
                      "slurmstepd: error: *** JOB 556 ON gpu4 CANCELLED AT 2026-02-10T22:31:02 DUE TO TIME LIMIT ***\n")
    said = " ".join(CliRunner().invoke(app, ["ingest", "files", str(output), "--lake", str(lake), "--cluster",
                                             CLUSTER]).output.split())
    assert (f"warning: {output}: 2 of 4 lines are stamped more than an hour after slurm/{CLUSTER}/556/0 ended"
            in said)
    report = land_log_files(Lake(lake), [output], cluster=CLUSTER)
    assert [(f.path, f.outlasting) for f in report.outlasting_outputs()] == [(str(output), 2)]


def test_node_pattern_names_each_files_node_from_its_path(tmp_path):
    """One landing of several nodes' kernel logs: the node comes from each path (lines that
    name their host keep it), and a pattern that misses a path fails before anything lands."""
    lake = Lake(tmp_path / "lake")
    for node in ("gpu-a", "gpu-b"):
        (tmp_path / "dmesg" / node).mkdir(parents=True)
        shutil.copy(FIXTURES / "dmesg-gpu.txt", tmp_path / "dmesg" / node / "dmesg.txt")
    (tmp_path / "syslog").mkdir()
    (tmp_path / "syslog" / "gpu-c.log").write_text(SYSLOG_LINE[0] + "\n")
    pattern = r"/(?:dmesg|syslog)/([^/]+?)(?:/dmesg\.txt|\.log)$"
    land_log_files(lake, [tmp_path / "dmesg"], cluster=CLUSTER, source="kmsg", node_pattern=pattern,
                   boot_time=datetime(2026, 2, 1, tzinfo=timezone.utc))
    land_log_files(lake, [tmp_path / "syslog"], cluster=CLUSTER, node_pattern=pattern, year=2026)
    nodes = observations(lake).group_by("source").agg(pl.col("node").unique().sort())
    assert dict(nodes.iter_rows()) == {"kmsg": ["gpu-a", "gpu-b"], "syslog": ["000-000-00000-1-gpu-1"]}
    stray = tmp_path / "stray.txt"
    stray.write_text("x\n")
    with pytest.raises(FilesError, match=r"finds no node \(its first group\) in .*stray\.txt"):
        land_log_files(lake, [tmp_path / "dmesg", stray], cluster=CLUSTER, node_pattern=pattern)
    with pytest.raises(FilesError, match=r"not a valid regex"):
        land_log_files(lake, [stray], cluster=CLUSTER, node_pattern=r"(unclosed")
    with pytest.raises(FilesError, match=r"either a node or a node pattern"):
        land_log_files(lake, [stray], cluster=CLUSTER, node="n", node_pattern=pattern)
    assert observations(lake)["node"].n_unique() == 3


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


def test_relanding_a_file_as_the_wrong_source_keeps_what_it_landed(tmp_path):
    lake = Lake(tmp_path / "lake")
    log = tmp_path / "messages"
    log.write_text(SYSLOG_LINE[0] + "\n")
    land_log_files(lake, [log], cluster=CLUSTER, year=2026)
    before = lake.scan("observations").collect()
    wrong = land_log_files(lake, [log], cluster=CLUSTER, year=2026, source="journald")
    assert (wrong.landed, wrong.rejected) == (0, 1)
    assert lake.scan("observations").collect().equals(before)


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


def test_a_gzip_rotation_cut_short_lands_its_lines_up_to_the_cut_and_is_reported(tmp_path):
    """An interrupted copy cut one node's ``syslog.2.gz`` short: its lines before the cut
    land (the line the cut went through does not), the other node's log lands whole, the
    report names the cut file, and ``ingest files`` says so and exits 1. A good copy landed
    again replaces what the cut one gave."""
    import gzip

    from typer.testing import CliRunner

    from engine.cli import app

    lines = [SYSLOG_LINE[0].replace("05:03:41", f"05:{i // 60:02d}:{i % 60:02d}") for i in range(3000)]
    body = ("\n".join(lines) + "\n").encode()
    whole = gzip.compress(body)
    (tmp_path / "n1").mkdir()
    (tmp_path / "n2").mkdir()
    (tmp_path / "n1" / "syslog.2.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "n2" / "syslog").write_bytes(body)
    lake = Lake(tmp_path / "lake")
    report = land_log_files(lake, [tmp_path / "n1", tmp_path / "n2"], cluster=CLUSTER, source="syslog", year=2026)
    cut, good = report.files
    assert (good.cut, good.landed) == (None, 3000)
    assert "end-of-stream marker" in cut.cut and 0 < cut.landed < 3000 and cut.landed == cut.read
    assert [f.path for f in report.cut_files()] == [cut.path]
    landed = lake.scan("observations").filter(pl.col("input_id") == cut.path).collect()
    assert landed.sort("seq")["message"].to_list() == [line.split("kernel: ", 1)[1] for line in lines[: cut.landed]]
    result = CliRunner().invoke(app, ["ingest", "files", str(tmp_path / "n1"), "--lake", str(tmp_path / "cli"),
                                      "--cluster", CLUSTER, "--source", "syslog", "--year", "2026"])
    said = " ".join(result.output.split())  # the console wraps long lines
    assert result.exit_code == 1 and "gzip data cut short or corrupt" in said
    assert "re-copy the file and land it again" in said
    (tmp_path / "n1" / "syslog.2.gz").write_bytes(whole)
    again = land_log_files(lake, [tmp_path / "n1"], cluster=CLUSTER, source="syslog", year=2026)
    assert (again.files[0].cut, again.landed) == (None, 3000)
    assert lake.scan("observations").filter(pl.col("input_id") == cut.path).collect().height == 3000


@pytest.mark.parametrize("cluster", ["x=y", "a/../../b", ""])
def test_a_cluster_name_that_is_no_folder_name_lands_nothing(tmp_path, cluster):
    lake = Lake(tmp_path / "lake")
    with pytest.raises(LakeError, match="cluster name .* is not allowed"):
        land_log_files(lake, [FIXTURES / "slurm-4242.out"], cluster=cluster, node="n1")
    assert not [p for p in tmp_path.rglob("*.parquet")]


def test_appended_output_of_a_requeued_job_is_split_by_attempt(tmp_path):
    """With ``--open-mode=append`` (or ``JobFileAppend=1``) one ``slurm-%j.out`` holds every
    attempt of a requeued job: each line goes to the attempt that had started by then."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        run_of("slurm/c1/88/0", "88", ts(2026, 12, 6, 17, 0), ts(2026, 12, 6, 18, 0), ["gpu-a"], 8),
        run_of("slurm/c1/88/1", "88", ts(2026, 12, 6, 18, 30), ts(2026, 12, 6, 19, 0), ["gpu-c"], 8, index=1),
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
    # Each attempt ran on one node: its unranked lines ran there too.
    assert obs["node"].to_list() == ["gpu-a", "gpu-a", "gpu-c"]


# ---------------------------------------------------------------- batches

def fleet_of_formats(folder: Path) -> list[Path]:
    """One folder holding every format, and the file-boundary cases batching must respect:
    a file that starts unstamped right after a stamped one, a stampless file, year-less
    stamps anchored to different mtimes, a kernel log that carries its own boot time next
    to one that does not, gzip with invalid UTF-8, blank and empty files."""
    from tests.test_files_parsers import (
        CUDA_OOM, DMESG_DELTA, DMESG_ISO, DMESG_T, ECC, FALLEN_OFF, GLOG_SIGTERM, NVLINK_XID, PID_RANK,
        PY_LOGGING, RAW_KMSG, SYSLOG_3164, TF_ISO, write,
    )
    import gzip
    import json

    folder.mkdir()
    shutil.copy(FIXTURES / "dmesg-gpu.txt", folder / "a-dmesg-gpu.txt")
    write(folder / "b-kern.txt", [SYSLOG_3164[0][0], "[  200.234935] " + FALLEN_OFF[0]])
    write(folder / "c-dmesg.txt", [DMESG_T[0], DMESG_ISO[0], RAW_KMSG[0], DMESG_DELTA[0]])
    write(folder / "d-messages", [line for line, _ in SYSLOG_3164] + ["    wrapped line", "this line is garbage"],
          mtime=ts(2026, 3, 1))
    write(folder / "e-syslog", [f"Dec 31 23:59:58 node1 kernel: {FALLEN_OFF[0]}",
                                f"Jan  1 00:00:03 node1 kernel: {NVLINK_XID[0]}"], mtime=ts(2027, 1, 5))
    write(folder / "f-syslog", [f"Dec 31 23:59:58 node1 kernel: {FALLEN_OFF[0]}"], mtime=ts(2027, 1, 5))
    write(folder / "g-journal.json", [
        json.dumps({"__REALTIME_TIMESTAMP": "1764516758123456", "_HOSTNAME": "gpu-3", "MESSAGE": NVLINK_XID[0]}),
        json.dumps({"__REALTIME_TIMESTAMP": "1764516759000000", "_COMM": "python3",
                    "MESSAGE": list(b"\x1b[31m" + ECC[0].encode() + b"\xff")}),
        "{not json",
    ])
    write(folder / "h-train.log", [PY_LOGGING[0], GLOG_SIGTERM[0], TF_ISO[0], PID_RANK[0],
                                   "[2026-13-45 15:32:38,123] " + CUDA_OOM[0], "[rank]: " + CUDA_OOM[0]],
          mtime=ts(2026, 9, 1))
    shutil.copy(FIXTURES / "slurm-4242.out", folder / "i-slurm-4242.out")  # starts unstamped
    write(folder / "j-pod.log", [f"2026-11-30T15:32:38.123456789Z [default0]:[rank0]: {CUDA_OOM[0]}", ECC[0]])
    write(folder / "k-stampless.out", [OOM_KILL[0], "", "  0: " + CUDA_OOM[0]])
    (folder / "l-kern.log.gz").write_bytes(gzip.compress(
        (SYSLOG_3164[2][0] + "\r\n").encode() + b"Feb 14 05:03:42 gpu-1 kernel: bad \xff\xfe\x00 bytes\n"))
    (folder / "m-empty.log").write_bytes(b"")
    (folder / "n-blank.log").write_text("\n  \n\n")
    return sorted(folder.iterdir())


def test_a_batch_parses_every_file_exactly_as_alone(tmp_path):
    from ingest.files.common import ParseContext, lines_of, read_bytes
    from ingest.files.read import parse_batch, read_log_file, untied_ranks

    files = [p.resolve() for p in fleet_of_formats(tmp_path / "logs")]
    now = ts(2026, 12, 1, 12)
    alone = [read_log_file(p, default_node="gpu-9", ingest_time=now) for p in files]
    raws = [read_bytes(p) for p in files]
    batch = parse_batch(lines_of(files, [r for r, _ in raws], [m for _, m in raws]),
                        ParseContext(year=None, boot_time=None, default_node="gpu-9", ingest_time=now))
    assert batch.files["source"].to_list() == [p.source for p in alone]
    assert set(batch.files["source"]) == {"kmsg", "syslog", "journald", "app", "kubectl"}
    assert batch.files["lines"].to_list() == [p.lines for p in alone]
    assert batch.files["blank"].to_list() == [p.blank for p in alone]
    for i, one in enumerate(alone):
        # Alone, a file is tied to no attempt: its ranks are what untied lines get.
        obs = untied_ranks(batch.observations.filter(pl.col("file") == i)).select(one.observations.columns)
        rejects = batch.rejects.filter(pl.col("file") == i).drop("file")
        assert obs.equals(one.observations), one.path.name
        assert rejects.equals(one.rejects), one.path.name
        assert one.lines == obs.height + rejects.height
    assert batch.observations.height > 30 and batch.rejects.height > 5


def test_landing_in_several_batches_lands_what_each_file_parses_to(tmp_path, monkeypatch):
    from ingest.files import land
    from ingest.files.read import read_log_file

    lake = Lake(tmp_path / "lake")
    logs = tmp_path / "logs"
    files = fleet_of_formats(logs)
    monkeypatch.setattr(land, "BATCH_BYTES", 1500)  # a few files per batch
    report = land_log_files(lake, [logs], cluster=CLUSTER, node="gpu-9")
    alone = [read_log_file(p, default_node="gpu-9") for p in files]
    assert [Path(f.path).name for f in report.files] == [p.name for p in files]
    assert [(f.source, f.read, f.landed, f.rejected) for f in report.files] == [
        (p.source, p.lines, p.observations.height, p.rejects.height) for p in alone
    ]
    # lines read == observations + rejects, per file and in the lake
    assert all(f.read == f.landed + f.rejected for f in report.files)
    assert lake.scan("observations").collect().height + lake.scan("rejects").collect().height == report.read

    def comparable(frame: pl.DataFrame) -> pl.DataFrame:  # ingest times differ between runs
        return frame.select(
            pl.when(pl.col("ts_source") == "ingest").then(None).otherwise(pl.col("ts")).alias("ts"),
            pl.all().exclude("ts", "source", "day", "cluster"),
        ).sort("origin")

    stored = lake.scan("observations").collect()
    assert comparable(stored).equals(comparable(pl.concat([p.observations for p in alone])))
    assert set(stored["source"]) == {p.source for p in alone}
    rejects = lake.scan("rejects").collect().drop("ts_ingest", "day", "cluster").sort("origin")
    assert rejects.equals(pl.concat([p.rejects for p in alone]).drop("ts_ingest").sort("origin"))


def test_many_files_land_in_few_parquet_files_and_reland_in_place(tmp_path):
    lake = Lake(tmp_path / "lake")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    land_attempts(lake, [
        {"attempt_id": f"slurm/c1/{job}/0", "job_id": str(job), "attempt_index": 0,
         "start_ts": ts(2026, 12, 6, 17, 0), "end_ts": ts(2026, 12, 6, 19, 0),
         "nodes": ["gpu-a", "gpu-b"], "n_nodes": 2, "ranks_per_node": 4}
        for job in range(1000, 1200)
    ])
    for job in range(1000, 1200):
        (jobs / f"slurm-{job}.out").write_text(f"  5: {WATCHDOG_R3[0]}\n{OOM_KILL[0]}\n")
    report = land_log_files(lake, [jobs], cluster=CLUSTER, year=2026)
    assert len(report.files) == 200 and report.landed == 400
    assert report.files[7].attempt_ids == ("slurm/c1/1007/0",)
    assert len(lake.files("observations")) == 1
    obs = lake.scan("observations").collect()
    # Rank 3's lines were printed by srun task 5, which ran on the second node (4 tasks each).
    assert obs.filter(pl.col("rank") == 3)["node"].unique().to_list() == ["gpu-b"]
    assert obs.group_by("attempt_id").len()["len"].unique().to_list() == [2]
    # one of them alone, then all again: never duplicated
    land_log_files(lake, [jobs / "slurm-1007.out"], cluster=CLUSTER, year=2026)
    assert len(lake.files("observations")) == 2
    land_log_files(lake, [jobs], cluster=CLUSTER, year=2026)
    assert lake.scan("observations").collect().height == 400
    assert len(lake.files("observations")) == 1


def test_a_requeued_jobs_appended_output_gives_each_run_its_own_nodes(tmp_path):
    """Run 0 (c02, c03) ends with slurmstepd's node-failure banner; run 1 (c01, c03) appends
    its output below it. Run 1's NCCL banners carry no stamp and inherit the banner's, from
    before run 1 started, yet they name c01, where only run 1 ran: they are run 1's. srun's
    report that run 0's task 0 ran on c03 does not place run 1's task 0, though c03 is one
    of run 1's nodes too."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        run_of("slurm/c1/88/0", "88", ts(2026, 12, 6, 17, 0), ts(2026, 12, 6, 18, 0), ["c02", "c03"], 1),
        run_of("slurm/c1/88/1", "88", ts(2026, 12, 6, 18, 2), ts(2026, 12, 6, 19, 0), ["c01", "c03"], 1, index=1),
    ])
    out = tmp_path / "slurm-88.out"
    # slurmstepd's banner (Slurm's req.c format), NCCL's bootstrap banner (NVIDIA/nccl-tests#188),
    # srun's report of a failed task (desihub/desitarget#628)
    out.write_text(
        "0: [2026-12-06 17:59:00,000] step 10\n"
        "srun: error: c03: task 0: Killed\n"
        "slurmstepd: error: *** JOB 88 ON c02 CANCELLED AT 2026-12-06T18:00:00 DUE TO NODE FAILURE ***\n"
        "0: c01:4551:4551 [0] NCCL INFO Bootstrap : Using ibs85f0:10.22.0.1<0>\n"
        "0: loading checkpoint\n"
        "0: [2026-12-06 18:30:00,000] step 11\n"
    )
    land_log_files(lake, [out], cluster=CLUSTER, year=2026)
    rows = observations(lake).sort("seq").select("seq", "attempt_id", "node").rows()
    assert rows[3] == (4, "slurm/c1/88/1", "c01")
    # run 1's task 0 runs on c01 (its first node), not where srun saw run 0's task 0
    assert rows[5] == (6, "slurm/c1/88/1", "c01")
    assert rows[0] == (1, "slurm/c1/88/0", "c03")  # run 0's task 0, where srun saw it


def test_unstamped_lines_below_a_jobs_cancellation_banner_are_the_next_runs(tmp_path):
    """Both runs of job 89 ran on c02 and c03, so no node tells them apart. slurmstepd's
    banner for the whole job ends run 0; srun's teardown under it is still run 0's, and
    from the traceback on, the unstamped lines are run 1's (dated from its start), though
    they inherit the banner's stamp, from before run 1 started. Without the banner a line
    follows its inherited stamp."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [
        run_of("slurm/c1/89/0", "89", ts(2026, 12, 6, 17, 0), ts(2026, 12, 6, 18, 0), ["c02", "c03"], 1),
        run_of("slurm/c1/89/1", "89", ts(2026, 12, 6, 18, 2), ts(2026, 12, 6, 18, 5), ["c02", "c03"], 1, index=1),
    ])
    out = tmp_path / "slurm-89.out"
    # slurmstepd's banner (Slurm's req.c format) and srun's teardown lines
    # (desihub/desitarget#628)
    banner = "slurmstepd: error: *** JOB 89 ON c02 CANCELLED AT 2026-12-06T18:00:00 DUE TO JOB REQUEUE ***\n"
    tail = (
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
        "srun: error: c03: task 1: Killed\n"
        "0: Traceback (most recent call last):\n"
        "0: RuntimeError: Error(s) in loading state_dict for GPTModel:\n"
        "srun: error: c02: task 0: Exited with exit code 1\n"
    )
    out.write_text("0: [2026-12-06 17:59:00,000] step 10\n" + banner + tail)
    land_log_files(lake, [out], cluster=CLUSTER, year=2026)
    rows = observations(lake).sort("seq").select("attempt_id", "ts").rows()
    run0, run1 = ("slurm/c1/89/0", ts(2026, 12, 6, 18, 0)), ("slurm/c1/89/1", ts(2026, 12, 6, 18, 2))
    assert rows == [("slurm/c1/89/0", ts(2026, 12, 6, 17, 59)), run0, run0, run0, run1, run1, run1]

    # A step's banner ends one step, not the run: what follows stays where its stamp puts it.
    out.write_text("0: [2026-12-06 17:59:00,000] step 10\n" + banner.replace("JOB 89", "STEP 89.0") + tail)
    land_log_files(lake, [out], cluster=CLUSTER, year=2026)
    assert {a for a, _ in observations(lake).select("attempt_id", "ts").rows()} == {"slurm/c1/89/0"}


def test_a_heterogeneous_jobs_output_goes_to_the_component_on_each_lines_node(tmp_path):
    """A heterogeneous job's components (sacct's ``900+0`` on h01, ``900+1`` on h02 and h03,
    started together) write one output file named after the leader, ``slurm-900.out``. A
    line naming a node goes to the component that ran on it; a line naming none to the
    leader, where the batch script runs (a one-node component's lines run on its node)."""
    lake = Lake(tmp_path / "lake")
    start, end = ts(2026, 12, 6, 17, 0), ts(2026, 12, 6, 18, 0)
    land_attempts(lake, [
        run_of("slurm/c1/900/0", "900+0", start, end, ["h01"], 1),
        run_of("slurm/c1/901/0", "900+1", start, end, ["h02", "h03"], 1),
    ])
    out = tmp_path / "slurm-900.out"
    # NCCL's bootstrap banner (NVIDIA/nccl-tests#188) and srun's report of a failed task
    # (desihub/desitarget#628)
    out.write_text(
        "[2026-12-06 17:01:00,000] starting\n"
        "h01:4551:4551 [0] NCCL INFO Bootstrap : Using ibs85f0:10.22.0.1<0>\n"
        "h03:4552:4552 [0] NCCL INFO Bootstrap : Using ibs85f0:10.22.0.3<0>\n"
        "srun: error: h02: task 1: Killed\n"
    )
    land_log_files(lake, [out], cluster=CLUSTER, year=2026)
    rows = observations(lake).sort("seq").select("attempt_id", "node").rows()
    # srun runs in the batch script: its report stays the leader's, on the leader's one node
    assert rows == [("slurm/c1/900/0", "h01"), ("slurm/c1/900/0", "h01"), ("slurm/c1/901/0", "h03"),
                    ("slurm/c1/900/0", "h01")]


def test_a_kubernetes_node_name_meets_its_journal_host_name(tmp_path):
    """EKS names a node ``ip-10-42-40-222.us-east-2.compute.internal`` in the Pod's
    ``spec.nodeName``, its journal ``ip-10-42-40-222``: the lake keeps both short, so the
    node's kernel lines meet the attempt that ran there."""
    lake = Lake(tmp_path / "lake")
    land_attempts(lake, [run_of("kueue/c1/w/0", "w", ts(2026, 12, 6, 18, 0), ts(2026, 12, 6, 19, 0),
                                ["ip-10-42-40-222.us-east-2.compute.internal", "IP-10-42-40-223"], 8)])
    log = tmp_path / "node.log"
    log.write_text("2026-12-06T18:30:00.000000+00:00 ip-10-42-40-222 kernel: NVRM: Xid (PCI:0000:06:00): 79, "
                   "GPU has fallen off the bus.\n")
    land_log_files(lake, [log], cluster=CLUSTER)
    assert lake.scan("attempts").collect()["nodes"].to_list() == [["ip-10-42-40-222", "ip-10-42-40-223"]]
    assert observations(lake)["node"].to_list() == ["ip-10-42-40-222"]
