"""The ``recovery_action`` python rule, end to end: an XID 154 asking for a GPU reset with no
GPU root before it on its node is the GPU's failure, and the rank's ``unspecified launch
failure`` beside it that failure seen by the process; after a GPU off the bus it only names
that fault's recovery; beside the job's own program error it confirms nothing and stays
context. Real lines, landed through the Slurm connector and the files landing, attributed
by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, XID_79, role_of, syslog, verdicts_by_job
from tests.test_earlier_job import LAUNCH_FAILURE
from tests.test_program_error import VALUE_ERROR

# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/446
XID_154 = "NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
930|930|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:25:00|g1|gres/gpu=8,node=1
931|931|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:25:00|g2|gres/gpu=8,node=1
932|932|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:25:00|g3|gres/gpu=8,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery_action")
    logs = root / "logs"
    logs.mkdir()
    # 930: the driver asked for a reset, nothing before it; rank 3 died of a launch failure.
    # 931: the GPU fell off the bus, and the driver asked for a reset 1 ms later.
    # 932: the reset was asked for, but the job died of its own ValueError a minute later.
    (logs / "g1.log").write_text(syslog("g1", ("10:05:00", "kernel: ok"), ("10:20:00", f"kernel: {XID_154}")))
    (logs / "g2.log").write_text(syslog("g2", ("10:05:00", "kernel: ok"), ("10:20:00", f"kernel: {XID_79}"),
                                        ("10:20:00", f"kernel: {XID_154}")))
    (logs / "g3.log").write_text(syslog("g3", ("10:05:00", "kernel: ok"), ("10:20:00", f"kernel: {XID_154}")))
    stamp = "[2026-11-20 {}:00,000]"
    (logs / "slurm-930.out").write_text(f"3: {stamp.format('10:10')} {ITERATION}\n3: {stamp.format('10:20')} {LAUNCH_FAILURE}\n")
    (logs / "slurm-931.out").write_text(f"3: {stamp.format('10:10')} {ITERATION}\n3: {stamp.format('10:20')} {LAUNCH_FAILURE}\n")
    (logs / "slurm-932.out").write_text(f"3: {stamp.format('10:10')} {ITERATION}\n3: {stamp.format('10:21')} {VALUE_ERROR}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_reset_the_driver_asks_for_after_no_gpu_fault_is_the_gpus_failure(verdicts):
    v = verdicts["930"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.recovery_action_changed", ["g1"])
    assert v["recommended_action"] == "reset_gpu_and_restart"
    assert role_of(v, "cuda.unspecified_launch_failure") == "confirmation"


def test_after_a_gpu_off_the_bus_it_only_names_the_recovery(verdicts):
    v = verdicts["931"]
    assert (v["cause"], v["culprit_nodes"]) == ("gpu.fallen_off_bus", ["g2"])
    assert [e["role"] for e in v["evidence"] if "recovery action" in e["message"]] == ["context"]


def test_beside_the_jobs_own_program_error_it_confirms_nothing(verdicts):
    v = verdicts["932"]
    assert (v["domain"], v["culprit_nodes"]) == ("workload", [])
