"""A node whose clock runs ahead, end to end: slurmd's launch lines of the job's step on
its nodes (real Slurm 22.05 format) show the node's offset, its log's lines move back onto
its peers' clock, and its XID 79 — stamped after the job ended by the node's own clock —
is the root the job's CUDA error confirms; once chronyd stepped that clock, the lines after
the step are on the right time. Landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from engine.config import EngineConfig
from engine.correlate import STEP_LAUNCH_EVENT, split_launch_lines
from engine.rules.loader import load_rule_pack
from engine.run import correlate, scope_attempts
from ingest.lake import Lake
from tests.end_to_end import ALIVE, ITERATION, XID_79, role_of, syslog, verdicts_by_job
from tests.test_ib_peer import retry_exceeded

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[1-4]|gres/gpu=32,node=4
"""
# leptonai/gpud#1209's port line in its DOWN state, and the NCCL watchdog's report as PyTorch
# prints it (hiyouga/LlamaFactory#6269), for rank {r} at {t}.
PORT_DOWN = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"
TIMEOUT = ("{r}: [rank{r}]:[E1120 {t}.{r:06d}000 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
           "operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
           "for 600099 milliseconds before timing out.")
# Recorded from the suite's real Slurm 22.05 slurmd (tests/slurm_lab.py), job id and port changed.
LAUNCH = "slurmd[4630]: slurmd: launch task StepId=900.0 request from UID:20001 GID:20001 HOST:10.48.0.81 PORT:39090"
# chrony's local.c ("System clock was stepped by %.6f seconds": the seconds added to the clock).
STEPPED = "chronyd[754]: System clock was stepped by {s} seconds"
# pytorch/pytorch#49832
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"


def _logs(tmp_path, launches: dict[str, str], xid_at: str, fault: str = f"kernel: {XID_79}"):
    """Each node's syslog with slurmd's launch line stamped by that node's clock, n4's
    with ``fault`` (an XID 79) at ``xid_at``."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for node, clock in launches.items():
        xid = ((xid_at, fault),) if node == "n4" else ()
        (logs / f"{node}.log").write_text(syslog(node, (clock, LAUNCH), *xid))
    return logs


def test_a_node_clock_running_ahead_is_corrected_by_its_step_launch(tmp_path):
    # n4's clock runs 250 s ahead: it stamps the launch at 10:04:15 and its XID at 10:33:20.
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "10:00:05", "n4": "10:04:15"}, "10:33:20")
    (logs / "slurm-900.out").write_text(f"30: [2026-11-20 10:33:21,000] {LAUNCH_FAILURE}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n4"])
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:29:10+00:00"
    assert role_of(v, "cuda.unspecified_launch_failure") == "confirmation"
    note = next(e for e in v["evidence"] if e["rule_id"] == "clock_offset")
    assert note["node"] == "n4" and "250.0 s ahead of" in note["message"]


def test_lines_after_chronyd_stepped_a_clock_that_ran_ahead_keep_their_stamps(tmp_path):
    """n4's clock ran 250 s ahead at the launch; at 10:09:20 (true time, the step line's
    stamp on the new clock) chronyd stepped it back by 250 s, and its GPU fell off the bus
    at 10:20:00: the XID is stamped right and stays there. Moved by the launch's offset, it
    would date the fault four minutes early."""
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "10:00:05"}, "")
    (logs / "n4.log").write_text(syslog("n4", ("10:04:15", LAUNCH), ("10:09:20", STEPPED.format(s="-250.000000")),
                                        ("10:20:00", f"kernel: {XID_79}")))
    (logs / "slurm-900.out").write_text(f"30: [2026-11-20 10:20:01,000] {LAUNCH_FAILURE}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n4"])
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:20:00+00:00"
    assert role_of(v, "host.clock_step") == "context"


def test_nodes_within_the_clock_skew_keep_their_stamps(tmp_path):
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:06", "n3": "10:00:05", "n4": "10:00:08"}, "10:20:00")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:20:00+00:00"
    assert not [e for e in v["evidence"] if e["rule_id"] == "clock_offset"]


def test_a_clock_far_ahead_still_brings_its_fault_into_the_window(tmp_path):
    """n4's clock runs 15 minutes ahead: its XID, stamped 12 minutes after the job ended
    by that clock, lies past the attach window's grace until the clock is read; read on
    its peers' clock it is the root (the launch line is matched to the job by its id)."""
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "10:00:05", "n4": "10:15:05"}, "10:42:00")
    (logs / "slurm-900.out").write_text(f"30: [2026-11-20 10:27:01,000] {LAUNCH_FAILURE}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n4"])
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:27:00+00:00"


def test_a_run_splits_the_launch_lines_off_as_correlation_does_itself(tmp_path):
    """A run splits each day's launch lines off as it reads the day; ``correlate`` called
    on the events as they are (``explain``, notebooks) splits them itself: the same
    correlated events either way, and the lines never reach them."""
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "10:00:05", "n4": "10:04:15"}, "10:33:20")
    verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))
    lake = Lake(tmp_path / "lake")
    events = lake.scan("events").collect().drop("day")
    attempts = scope_attempts(lake, date(2026, 11, 20), date(2026, 11, 20), None)
    rest, lines = split_launch_lines(events)
    assert lines.sort("node").select("node", "_job", "_step").rows() == [(f"n{i}", "900", "0") for i in range(1, 5)]
    assert STEP_LAUNCH_EVENT not in rest["event"].to_list() and rest.height == events.height - 4
    pack, config = load_rule_pack(), EngineConfig()
    whole = correlate(attempts, events, pack, config)
    split = correlate(attempts, rest, pack, config, launches=lines)
    assert whole.equals(split)
    assert "host.clock_offset" in whole["event"].to_list() and STEP_LAUNCH_EVENT not in whole["event"].to_list()


@pytest.mark.parametrize("ranks_on_its_clock", [True, False])
def test_a_node_clock_running_behind_moves_its_ranks_lines_only_when_they_read_it(tmp_path, ranks_on_its_clock):
    """n4's clock runs 400 s behind: its port went down at 10:10:00 by its peers' clocks and
    the ranks timed out at 10:20:00. When n4's ranks stamped their timeouts on its clock
    (400 s early, as they do), they move with it: left as stamped, they would date the hang
    before the port went down and make it context. When they were stamped on the right
    time (a collector that restamps), they stay."""
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "10:00:05", "n4": "09:53:25"}, "10:03:20",
                 fault=PORT_DOWN)
    n4_clock = "10:13:20" if ranks_on_its_clock else "10:20:00"
    (logs / "slurm-900.out").write_text("".join(
        TIMEOUT.format(r=r, t=n4_clock if r >= 24 else "10:20:00") + "\n" for r in range(32)))
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.link_down", ["n4"])



@pytest.mark.parametrize("ranks_on_its_clock", [True, False])
def test_a_gpu_lost_on_the_silent_ranks_node_is_the_root_though_its_clock_dates_it_after_the_hang(
        tmp_path, ranks_on_its_clock):
    """No launch line places n4's clock, four minutes ahead: its GPU fell off the bus at
    10:20 and reads 10:24, four minutes after the collective that timed out began. Rank 27,
    on n4, never reported the timeout the other 31 did: the GPU it waited on is the root."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("n1", "n2", "n3"):
        (logs / f"{node}.log").write_text(syslog(node, ("09:59:00", ALIVE)))
    (logs / "n4.log").write_text(syslog("n4", ("09:59:00", ALIVE), ("10:24:00", f"kernel: {XID_79}")))
    n4_clock = "10:34:00" if ranks_on_its_clock else "10:30:00"
    (logs / "slurm-900.out").write_text("".join(
        TIMEOUT.format(r=r, t=n4_clock if r >= 24 else "10:30:00") + "\n" for r in range(32) if r != 27))
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n4"])
    # Nothing but the silent rank ties the fault to the hang: its stamp came after it.
    assert v["quality"] == "probable"


# The watchdog's report of the work it found failed, as PyTorch prints it (NVIDIA/nccl#1409),
# for rank {r} at {t}: stamped, and naming no timeout.
DETECTED = ("{r}: [rank{r}]:[E1120 {t}.184373931 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception "
            "(either an error or timeout) detected by watchdog at work: 80078, last enqueued NCCL work: 80078, last "
            "completed NCCL work: 80077.")
# The ECC error a rank's CUDA call returns (vllm-project/vllm#5222), on rank {r}.
ECC = "{r}: RuntimeError: CUDA error: uncorrectable ECC error encountered"
OUTPUT_SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
910|910|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|m[1-2]|gres/gpu=16,node=2
911|911|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|m[3-5]|gres/gpu=24,node=3
"""


def test_a_clock_ahead_is_read_off_the_job_output_where_no_launch_line_places_it(tmp_path):
    """No launch line places any clock. 910: m2's runs 60 s ahead; its port went down at
    10:20:00 (stamped 10:21:00, after the job ended) and m1's ranks gave up on it. srun wrote
    m2's ranks' reports (stamped 10:21:05) above m1's (10:20:06), and past the job's end: m2's
    clock runs ahead. 911: m5's runs 30 s ahead; its GPU's ECC error, printed above the
    peers' reports, is the root, not the NCCL errors stamped before it by the other clocks."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("m1", "m3", "m4"):
        (logs / f"{node}.log").write_text(syslog(node, ("09:59:00", ALIVE), ("10:30:00", ALIVE)))
    (logs / "m2.log").write_text(syslog("m2", ("10:00:00", ALIVE), ("10:21:00", PORT_DOWN)))
    (logs / "m5.log").write_text(syslog("m5", ("10:00:00", ALIVE), ("10:40:00", ALIVE)))
    (logs / "slurm-910.out").write_text(
        f"0: [2026-11-20 10:19:50,000] {ITERATION}\n{retry_exceeded(3, 'm1', '10.22.0.2')}\n"
        + "".join(DETECTED.format(r=r, t="10:21:05") + "\n" for r in (8, 9))
        + "".join(DETECTED.format(r=r, t="10:20:06") + "\n" for r in (0, 1))
    )
    (logs / "slurm-911.out").write_text(
        f"0: [2026-11-20 10:19:50,000] {ITERATION}\n"
        + "".join(DETECTED.format(r=r, t="10:20:31") + "\n" for r in (16, 17)) + ECC.format(r=18) + "\n"
        + "".join(DETECTED.format(r=r, t="10:20:02") + "\n" for r in (0, 8))
        + "".join(retry_exceeded(r, node, "10.22.0.5") + "\n" for r, node in ((3, "m3"), (11, "m4")))
    )
    v = verdicts_by_job(tmp_path, OUTPUT_SACCT, logs, date(2026, 11, 20))
    assert (v["910"]["domain"], v["910"]["cause"], v["910"]["culprit_nodes"]) == ("network", "network.link_down", ["m2"])
    note = next(e for e in v["910"]["evidence"] if e["rule_id"] == "clock_offset")
    assert note["node"] == "m2" and "ahead of" in note["message"]
    assert (v["911"]["domain"], v["911"]["culprit_nodes"]) == ("gpu_memory", ["m5"])


def test_nodes_split_evenly_between_two_clocks_move_none(tmp_path):
    """Two nodes stamp the launch at 10:00, two at 13:00 (a zone landed wrong): the median
    lies between them, on no node's clock, so no node is moved by it."""
    logs = _logs(tmp_path, {"n1": "10:00:05", "n2": "10:00:05", "n3": "13:00:05", "n4": "13:00:05"}, "10:20:00")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["900"]
    assert not [e for e in v["evidence"] if e["rule_id"] == "clock_offset"]


ONE_NODE_SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
920|920|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|q1|gres/gpu=8,node=1
921|921|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|q2|gres/gpu=8,node=1
"""
# https://github.com/godweiyang/NN-CUDA-Example/issues/11 (the CUDA error a faulty kernel raises).
ILLEGAL_ACCESS = "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_a_one_node_jobs_own_error_stamped_after_its_end_by_a_clock_ahead_is_its_root(tmp_path):
    """q1's clock runs four minutes ahead and no peer or launch line says so: the job's own
    last lines read as printed after it ended, which no process can do. Its own error is
    still its root, never definitive."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "q1.log").write_text(syslog("q1", ("10:04:00", ALIVE), ("10:30:00", ALIVE)))
    (logs / "slurm-920.out").write_text(f"0: [2026-11-20 10:24:10,000] {ITERATION}\n0: {ILLEGAL_ACCESS}\n")
    # 921: the same clock, and the node's kernel lost the GPU as the job failed: the fault,
    # not the job's report of it, is the root (no precedence rule weighs lines that late).
    (logs / "q2.log").write_text(syslog("q2", ("10:04:00", ALIVE), ("10:24:12", f"kernel: {XID_79}"), ("10:30:00", ALIVE)))
    (logs / "slurm-921.out").write_text(f"0: [2026-11-20 10:24:10,000] {ITERATION}\n0: {ILLEGAL_ACCESS}\n")
    verdicts = verdicts_by_job(tmp_path, ONE_NODE_SACCT, logs, date(2026, 11, 20))
    v = verdicts["920"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.illegal_memory_access")
    assert v["quality"] != "definitive"
    assert (verdicts["921"]["domain"], verdicts["921"]["cause"], verdicts["921"]["culprit_nodes"]) == (
        "gpu", "gpu.fallen_off_bus", ["q2"])
