"""Failures at a job's start and end, end to end through the Slurm connector, the files
landing and a run: srun refusing a step the allocation cannot hold is the job's request; a
copy in the job's script that left files behind after training completed is the job's
step; a checkpoint write that failed once and went through on retry passes, and a GPU
lost an hour later is what ended the job."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, XID_79, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
990|990|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:00:05|p1|gres/gpu=8,node=1
991|991|train|alice|FAILED|23:0|2026-11-20T10:00:00|2026-11-20T11:00:00|p2|gres/gpu=8,node=1
992|992|train|alice|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:30:00|p3|gres/gpu=8,node=1
"""
# https://github.com/BLAST-WarpX/warpx/pull/3601
STEP_REFUSED = "srun: error: Unable to create step for job 990: More processors requested than permitted"
# https://github.com/RsyncProject/rsync/issues/653, after the per-file complaint of
# https://github.com/openshift-eng/elliott/pull/128
RSYNC = ('rsync: failed to set permissions on "/archive/runs/.": Operation not permitted (1)\n'
         "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1338) "
         "[sender=3.2.7]")
# pytorch/pytorch#48580's error, logged with its stamp by the job's checkpoint retry.
EIO = "[2026-11-20 09:20:00,000][ckpt][WARNING] - save failed, retrying: OSError: [Errno 5] Input/output error"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("phases")
    logs = root / "logs"
    logs.mkdir()
    (logs / "slurm-990.out").write_text(f"{STEP_REFUSED}\n")
    (logs / "slurm-991.out").write_text(
        f"[2026-11-20 10:55:00,000] {ITERATION}\n[2026-11-20 10:59:00,000] training done\n{RSYNC}\n")
    (logs / "slurm-992.out").write_text(
        f"[2026-11-20 09:19:00,000] {ITERATION}\n{EIO}\n[2026-11-20 09:21:00,000] {ITERATION}\n")
    (logs / "p3.log").write_text(syslog("p3", ("09:10:00", "kernel: ok"), ("10:29:00", f"kernel: {XID_79}")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_step_the_allocation_cannot_hold_is_the_jobs_request(verdicts):
    v = verdicts["990"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.invalid_resource_request", [])


def test_a_copy_that_left_files_behind_after_training_is_the_jobs_step(verdicts):
    v = verdicts["991"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.file_transfer_failed", [])


def test_a_write_retried_an_hour_before_a_lost_gpu_passed(verdicts):
    v = verdicts["992"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["p3"])
