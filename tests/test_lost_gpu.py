"""The ``lost_gpu`` python rule, end to end: an ``invalid device ordinal`` on a node whose
GPU fell off the bus before the attempt (and was not brought back by a boot), or never came
up at its boot, is that GPU;
without such a fall-off, or after a boot, it stays the job's own mistake. Real lines, landed
through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, BOOT, syslog, verdicts_by_job

# https://github.com/NVIDIA/nvidia-docker/issues/1553
XID_79 = "NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus."
# https://github.com/hpcaitech/Open-Sora/issues/40
INVALID_DEVICE = "RuntimeError: CUDA error: invalid device ordinal"
# https://github.com/NVIDIA/gpu-operator/issues/1146
INIT_FAILED = "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5"

# The GPUs fell off at 09:50, during earlier jobs (not in this dump); these start at 11:00, past the lookback.
SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
801|801|train|bob|FAILED|1:0|2026-11-20T11:00:00|2026-11-20T11:01:00|n1|gres/gpu=8,node=1
802|802|train|bob|FAILED|1:0|2026-11-20T11:00:00|2026-11-20T11:01:00|n2|gres/gpu=8,node=1
803|803|train|bob|FAILED|1:0|2026-11-20T11:00:00|2026-11-20T11:01:00|n3|gres/gpu=8,node=1
804|804|train|bob|FAILED|1:0|2026-11-20T11:00:00|2026-11-20T11:01:00|n4|gres/gpu=8,node=1
805|805|train|bob|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|n5|gres/gpu=8,node=1
806|806|train|bob|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:01:00|n6|gres/gpu=8,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost_gpu")
    logs = root / "logs"
    logs.mkdir()
    alive = [("08:00:00", ALIVE), ("12:00:00", ALIVE)]
    (logs / "n1.log").write_text(syslog("n1", alive[0], ("09:50:00", f"kernel: {XID_79}"), alive[1]))
    (logs / "n2.log").write_text(syslog("n2", alive[0], ("09:50:00", f"kernel: {XID_79}"),
                                         ("10:30:00", f"kernel: {BOOT}"), alive[1]))
    (logs / "n3.log").write_text(syslog("n3", *alive))
    (logs / "n4.log").write_text(syslog("n4", alive[0], ("09:40:00", f"kernel: {BOOT}"),
                                         ("09:40:35", f"kernel: {INIT_FAILED}"), alive[1]))
    for job in ("801", "802", "803", "804"):
        (logs / f"slurm-{job}.out").write_text(f"7: [2026-11-20 11:00:30,000] {INVALID_DEVICE}\n")
    # 805 and 806 start at 10:00, in reach of a fall-off at 09:50:10 and a boot at 09:55
    # (within the lookback): on n5 the GPU then failed to initialise, on n6 it came back.
    (logs / "n5.log").write_text(syslog("n5", alive[0], ("09:50:10", f"kernel: {XID_79}"), ("09:55:00", f"kernel: {BOOT}"),
                                         ("09:55:31", f"kernel: {INIT_FAILED}"), alive[1]))
    (logs / "n6.log").write_text(syslog("n6", alive[0], ("09:50:10", f"kernel: {XID_79}"), ("09:55:00", f"kernel: {BOOT}"),
                                         alive[1]))
    for job in ("805", "806"):
        (logs / f"slurm-{job}.out").write_text(f"7: [2026-11-20 10:00:35,000] {INVALID_DEVICE}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_an_invalid_device_ordinal_after_a_fall_off_is_the_lost_gpu(verdicts):
    v = verdicts["801"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == (
        "gpu", "gpu.fallen_off_bus", ["n1"], ["0000:09:00"])
    assert v["quality"] == "definitive"  # the invalid device ordinal confirms it


def test_a_boot_since_the_fall_off_leaves_it_the_jobs_mistake(verdicts):
    assert (verdicts["802"]["domain"], verdicts["802"]["cause"]) == ("workload", "workload.invalid_device")


def test_without_a_fall_off_it_is_the_jobs_mistake(verdicts):
    assert (verdicts["803"]["domain"], verdicts["803"]["cause"]) == ("workload", "workload.invalid_device")


def test_an_invalid_device_ordinal_after_a_gpu_that_never_came_up_is_that_gpu(verdicts):
    v = verdicts["804"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == (
        "gpu", "gpu.init_failure", ["n4"], ["0000:0a:00"])


def test_a_fall_off_before_a_boot_is_not_the_next_jobs_gpu(verdicts):
    """The boot reset the GPU: on n5 it failed to come up (that is the root), on n6 it came
    back, and the job's invalid device ordinal is its own."""
    v = verdicts["805"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.init_failure", ["n5"])
    assert (verdicts["806"]["domain"], verdicts["806"]["cause"]) == ("workload", "workload.invalid_device")
