"""A root candidate from before an attempt started (the ``lookback``) is the root only of an
attempt that started failing within ``fail_at_once`` of its start: an XID 79 shortly before
a job that fails at once is its root; the same XID, or a NIC's transmit timeout, before a
job that then ran for twenty minutes is context, and so is a transmit timeout during a job
that ran on for an hour and then failed of something else, since the pack says such a
fault passes by itself (``passes``). Real lines, landed through the Slurm
connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from engine.relabel import demote_outlived_roots
from engine.rules.loader import load_rule_pack
from tests.end_to_end import CUDA_OOM, ITERATION, XID_79, role_of, syslog, verdicts_by_job

# https://github.com/ntop/PF_RING/issues/74
TX_TIMEOUT = "kernel: NETDEV WATCHDOG: cap0 (i40e): transmit queue 0 timed out"
# https://github.com/QwenLM/Qwen-VL/issues/142
DEVICE_MISMATCH = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
810|810|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:05|h1|gres/gpu=8,node=1
811|811|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:02:00|h2|gres/gpu=8,node=1
812|812|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:25:00|h3|gres/gpu=8,node=1
813|813|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T11:30:05|h4|gres/gpu=8,node=1
814|814|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T11:30:05|h5|gres/gpu=8,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("prestart")
    logs = root / "logs"
    logs.mkdir()
    (logs / "h1.log").write_text(syslog("h1", ("09:48:15", TX_TIMEOUT)))
    (logs / "h2.log").write_text(syslog("h2", ("09:45:00", f"kernel: {XID_79}")))
    (logs / "h3.log").write_text(syslog("h3", ("09:45:00", f"kernel: {XID_79}")))
    (logs / "slurm-810.out").write_text(
        f"[2026-11-20 10:10:00,000] {ITERATION}\n[2026-11-20 10:22:00,000] {DEVICE_MISMATCH}\n"
    )
    (logs / "slurm-811.out").write_text("")
    (logs / "slurm-812.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    # A transmit queue of h4 and of h5 reset five minutes into the job; both jobs ran on for
    # an hour and a half; 813's rank then ran out of GPU memory.
    for node, job, last in (("h4", "813", CUDA_OOM), ("h5", "814", ITERATION)):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", TX_TIMEOUT)))
        (logs / f"slurm-{job}.out").write_text(
            f"[2026-11-20 10:10:00,000] {ITERATION}\n[2026-11-20 11:30:00,000] {last}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_nic_timeout_before_a_job_that_ran_twenty_minutes_is_context(verdicts):
    v = verdicts["810"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.exception")
    assert role_of(v, "fabric.netdev_tx_timeout") == "context"


def test_a_lost_gpu_before_a_job_that_failed_at_once_is_its_root(verdicts):
    v = verdicts["811"]
    assert (v["cause"], v["culprit_nodes"]) == ("gpu.fallen_off_bus", ["h2"])


def test_a_lost_gpu_before_a_job_that_ran_on_is_not_its_root(verdicts):
    v = verdicts["812"]
    assert v["cause"] != "gpu.fallen_off_bus"
    assert role_of(v, "gpu_xid") == "context"


def test_a_nic_timeout_a_job_outlived_before_its_own_error_is_context(verdicts):
    v = verdicts["813"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.cuda_oom")
    assert role_of(v, "fabric.netdev_tx_timeout") == "context"


def test_a_nic_timeout_with_nothing_else_to_explain_the_failure_stays_the_root(verdicts):
    v = verdicts["814"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.nic_tx_timeout", ["h5"])


def test_the_pack_says_which_faults_pass_by_themselves():
    pairs = set(load_rule_pack().passing().select("rule_id", "event").iter_rows())
    assert {("fabric.netdev_tx_timeout", "network.nic_tx_timeout"),
            ("comm.name_resolution", "network.name_resolution_failed"),
            ("comm.kernel_table_full", "network.kernel_table_full")} <= pairs
    # Only the resolver's map entry passes: a host name that does not exist stays wrong.
    assert ("comm.name_resolution", "workload.unknown_host") not in pairs


def outlived_events(first: str, later: str) -> pl.DataFrame:
    """Two roots of one 90-minute attempt: ``first`` (rule id = event) five minutes in,
    ``later`` at its end."""
    start = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    stamps = [start + timedelta(minutes=5), start + timedelta(minutes=90)]
    return pl.DataFrame({
        "attempt_id": ["a", "a"], "event_id": [f"{first}@o:1", f"{later}@o:2"], "rule_id": [first, later],
        "event": [first, later], "cause": [first, later], "caused_by": [None, None],
        "role": ["root_candidate"] * 2, "ts": stamps, "ts_hi": stamps, "last_ts": [None, None],
        "params": ["{}", "{}"], "start_ts": [start] * 2, "end_ts": [stamps[1]] * 2,
    })


def test_only_an_outcome_flagged_as_passing_is_outlived():
    # The same two roots: the first is demoted only when the pack says its fault passes.
    events = outlived_events("nic_reset", "cuda_oom")
    passing = pl.DataFrame({"rule_id": ["nic_reset"], "event": ["nic_reset"], "passes": [True]})
    relabelled = demote_outlived_roots(events, timedelta(minutes=5), timedelta(seconds=30), passing)
    assert relabelled["role"].to_list() == ["context", "root_candidate"]
    assert relabelled.columns == events.columns
    kept = demote_outlived_roots(events, timedelta(minutes=5), timedelta(seconds=30), passing.clear())
    assert kept["role"].to_list() == ["root_candidate", "root_candidate"]
