"""A root the decision cannot pick takes no role from another line, end to end: a node
whose clock runs far ahead stamps its NVLink XID after the job ended, and the CUDA error the
job printed before its end stays the root (instead of becoming the late XID's
confirmation and leaving nothing), while alone such an XID is the root, never a definitive
one; a GPU lost after the end on a workload root's node leaves that root probable; and a
CUDA error that confirmed an XID a later rule gave to the previous job is a root again. Real lines, landed through the Slurm connector and the
files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job

# https://github.com/NVIDIA/NVSentinel/pull/516
XID_74 = ("NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link "
          "14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
# https://github.com/MIC-DKFZ/nnUNet/issues/1519
CUDA_NVLINK = "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution"

# https://github.com/akash-network/support/issues/244
XID_94 = "NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"
# https://github.com/vllm-project/vllm/issues/5222
CUDA_ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
910|910|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n1|gres/gpu=8,node=1
911|911|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T11:00:00|n2|gres/gpu=8,node=1
912|912|train|alice|FAILED|1:0|2026-11-20T12:00:00|2026-11-20T12:30:00|n3|gres/gpu=8,node=1
913|913|train|alice|FAILED|1:0|2026-11-20T14:00:00|2026-11-20T15:00:00|n4|gres/gpu=8,node=1
914|914|train|alice|FAILED|1:0|2026-11-20T16:00:00|2026-11-20T17:00:00|n[5-6]|gres/gpu=16,node=2
"""
# pytorch/pytorch#49832, then NVIDIA/open-gpu-kernel-modules#1151's driver line.
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"
FELL_OFF = "NVRM: GPU 0000:61:00.0: GPU has fallen off the bus."


def test_an_xid_stamped_after_the_end_leaves_the_cuda_error_the_root(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # n1's clock runs 40 s ahead: the XID of the fault at 08:59:30 reads 09:00:10.
    (logs / "n1.log").write_text(syslog("n1", ("07:50:00", ALIVE),
                                        ("09:00:10", f"kernel: {XID_74}")))
    (logs / "slurm-910.out").write_text(f"[2026-11-20 08:10:00,000] {ITERATION}\n[2026-11-20 08:59:31,000] {CUDA_NVLINK}\n")
    # n2's XID is in time: it stays the root and the CUDA error its confirmation.
    (logs / "n2.log").write_text(syslog("n2", ("10:59:30", f"kernel: {XID_74}")))
    (logs / "slurm-911.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n[2026-11-20 10:59:31,000] {CUDA_NVLINK}\n")
    verdicts = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))
    late, in_time = verdicts["910"], verdicts["911"]
    assert (late["domain"], late["culprit_nodes"]) == ("nvlink", ["n1"])
    assert [e["rule_id"] for e in late["evidence"] if e["role"] == "root_candidate"][0] == "cuda.nvlink_uncorrectable"
    assert (in_time["domain"], in_time["culprit_nodes"]) == ("nvlink", ["n2"])
    roles = {e["rule_id"]: e["role"] for e in in_time["evidence"]}
    assert roles["cuda.nvlink_uncorrectable"] == "confirmation"


def test_a_confirmation_of_an_xid_the_previous_job_left_is_the_root_again(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # n3's contained ECC error is stamped 90 s before the job started: earlier_job.py makes
    # it the previous job's (context), after precedence made the job's own CUDA error, two
    # minutes later, its confirmation.
    (logs / "n3.log").write_text(syslog("n3", ("11:58:30", f"kernel: {XID_94}")))
    (logs / "slurm-912.out").write_text(f"[2026-11-20 12:00:05,000] {ITERATION}\n[2026-11-20 12:00:30,000] {CUDA_ECC}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["912"]
    assert (v["domain"], v["culprit_nodes"]) == ("gpu_memory", ["n3"])
    roles = {e["rule_id"]: e["role"] for e in v["evidence"]}
    assert roles["cuda_uncorrectable_ecc"] == "root_candidate"


def test_an_xid_stamped_after_the_end_is_the_root_when_nothing_else_is(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # n4's clock runs 95 s ahead and the job printed no error of its own: the late XID is
    # the only explanation, a root that is not definitive.
    (logs / "n4.log").write_text(syslog("n4", ("13:50:00", ALIVE),
                                        ("15:01:05", f"kernel: {XID_74}")))
    (logs / "slurm-913.out").write_text(f"[2026-11-20 14:10:00,000] {ITERATION}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["913"]
    assert (v["domain"], v["culprit_nodes"], v["quality"]) == ("nvlink", ["n4"], "probable")


def test_a_gpu_lost_after_the_end_on_the_roots_node_leaves_the_workload_root_not_definitive(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # n6's clock runs four minutes ahead, and no launch line places it: its GPU fell off the
    # bus, which the rank on it saw as a launch failure.
    (logs / "n5.log").write_text(syslog("n5", ("15:50:00", ALIVE)))
    (logs / "n6.log").write_text(syslog("n6", ("15:50:00", ALIVE), ("17:03:53", f"kernel: {FELL_OFF}")))
    (logs / "slurm-914.out").write_text(f"0: [2026-11-20 16:10:00,000] {ITERATION}\n"
                                        f"11: [2026-11-20 16:59:50,000] [rank11]: {LAUNCH_FAILURE}\n"
                                        "srun: error: n6: task 11: Exited with exit code 1\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["914"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.launch_failure", "probable")
    assert [e["role"] for e in v["evidence"] if e["rule_id"] == "gpu_fallen_off_bus"] == ["root_candidate"]
