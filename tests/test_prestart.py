"""A root candidate from before an attempt started (the ``lookback``) is the root only of an
attempt that started failing within ``fail_at_once`` of its start: an XID 79 shortly before
a job that fails at once is its root; the same XID, or a NIC's transmit timeout, before a
job that then ran for twenty minutes is context, and so is a transmit timeout during a job
that ran on for an hour and then failed of something else. Real lines, landed through the Slurm
connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

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
