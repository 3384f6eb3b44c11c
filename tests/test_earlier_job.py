"""The ``earlier_job_events`` python rule, end to end: OOM kills, XID 13 and power-offs stamped
before an attempt started are the previous job's or boot's, never this attempt's root;
stamped during it, they still are, unless the job ran on long after them (the kill's own
reaper line does not say it stopped; a neighbour's segfault the kernel reported); a GPU fault another job on the node reported, and
this one did not, is that job's. Real lines, landed through the Slurm connector and the files
landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CGROUP_OOM, CUDA_OOM, ITERATION, XID_79, syslog, verdicts_by_job, watchdog_timeout

# https://github.com/doitsujin/dxvk/issues/1027
XID_13 = "NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ChID 0052, Class 00000000, Offset 00001b0c, Data 1000f010"
# https://github.com/systemd/systemd/issues/39521
POWER_OFF = "systemd-logind[633]: System is powering down."

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
500|500|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n1|gres/gpu=8,node=1
501|501|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n2|gres/gpu=8,node=1
502|502|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n3|gres/gpu=8,node=1
503|503|train|alice|NODE_FAIL|0:0|2026-11-20T10:00:00|2026-11-20T10:16:00|n4|gres/gpu=8,node=1
504|504|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n5|gres/gpu=8,node=1
505|505|train|alice|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T10:40:00|n6|gres/gpu=4,node=1
506|506|ft|bob|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:45|n7|gres/gpu=4,node=1
507|507|sim|carol|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|n7|gres/gpu=4,node=1
508|508|pre|dave|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:06:00|n8|gres/gpu=4,node=1
509|509|ft|erin|TIMEOUT|0:0|2026-11-20T06:05:00|2026-11-20T10:05:40|n8|gres/gpu=4,node=1
510|510|eval|fay|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:06:10|n9|gres/gpu=1,node=1
511|511|eval|gus|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:06:20|n9|gres/gpu=1,node=1
512|512|pre|hal|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:17:00|n10|gres/gpu=8,node=1
513|513|pre|ivy|FAILED|1:0|2026-11-20T10:20:00|2026-11-20T10:20:30|n10|gres/gpu=8,node=1
514|514|pre|jan|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:07:00|n11|gres/gpu=8,node=1
515|515|pre|kim|FAILED|1:0|2026-11-20T10:30:00|2026-11-20T10:30:30|n11|gres/gpu=8,node=1
516|516|ft|lea|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:06:30|n12|gres/gpu=4,node=1
517|517|ft|max|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:06:40|n12|gres/gpu=4,node=1
518|518|train|ned|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:50:00|n13|gres/gpu=8,node=1
519|519|nb|olga|TIMEOUT|0:0|2026-11-20T09:00:00|2026-11-20T10:50:00|n14|gres/gpu=2,node=1
520|520|sim|pat|FAILED|139:0|2026-11-20T09:30:00|2026-11-20T10:10:30|n14|gres/gpu=2,node=1
521|521|rl|quinn|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:25:10|n15|gres/gpu=8,node=1
"""
# pytorch/pytorch#51382's wording of the fault XID 13 reports, as carol's rank prints it.
ILLEGAL_ADDRESS = "RuntimeError: CUDA error: an illegal memory access was encountered"
# What a rank prints when its GPU is gone: pytorch/pytorch#2567's launch failure and
# liunian-Jay/MU-GOT#7's "unknown error" (which alone confirms no fault).
LAUNCH_FAILURE = ("RuntimeError: cuda runtime error (4) : unspecified launch failure at "
                  "/home/ubuntu/pytorch/torch/lib/THC/THCTensorCopy.cu:85")
UNKNOWN_ERROR = "RuntimeError: CUDA error: unknown error"
# https://github.com/microsoft/SimXNS/issues/2
INVALID_ORDINAL = "RuntimeError: CUDA error: invalid device ordinal"
# A double-bit ECC error (NVIDIA/gpu-operator#1146) and what the rank on that GPU prints.
XID_48 = ("NVRM: Xid (PCI:0000:07:00): 48, pid=2541968, name=python, An uncorrectable double bit error (DBE) "
          "has been detected on GPU in the framebuffer at physAddr 0x1f3c5a2e40 partition 3, subpartition 1.")
ECC_ERROR = "RuntimeError: CUDA error: uncorrectable ECC error encountered"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("earlier")
    logs = root / "logs"
    logs.mkdir()
    (logs / "n1.log").write_text(syslog("n1", ("09:50:00", f"kernel: {CGROUP_OOM}")))  # the job before
    (logs / "n2.log").write_text(syslog("n2", ("10:20:00", f"kernel: {CGROUP_OOM}")))  # this job's
    (logs / "n3.log").write_text(syslog("n3", ("09:55:00", POWER_OFF)))  # the boot before
    (logs / "n4.log").write_text(syslog("n4", ("10:15:00", POWER_OFF)))  # during the job
    (logs / "n5.log").write_text(syslog("n5", ("09:45:00", f"kernel: {XID_13}")))  # the job before
    (logs / "n6.log").write_text(syslog("n6", ("08:30:00", f"kernel: {XID_13}")))  # the job beside it
    (logs / "n7.log").write_text(syslog("n7", ("10:20:05", f"kernel: {XID_13}")))  # carol's, bob's job beside it
    for job in ("500", "502", "504"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:29:00,000] {CUDA_OOM}\n")
    (logs / "slurm-505.out").write_text("[2026-11-20 10:20:00,000] step 51000\nslurmstepd: error: *** JOB 505 ON n6 "
                                        "CANCELLED AT 2026-11-20T10:39:58 DUE TO TIME LIMIT ***\n")
    # Bob's unstamped traceback may have come after the XID; carol's rank reported its fault.
    (logs / "slurm-506.out").write_text("[2026-11-20 10:19:00,000] step 9\nTraceback (most recent call last):\n"
                                        '  File "train.py", line 3, in <module>\nKeyError: \'input_ids\'\n')
    (logs / "slurm-507.out").write_text(f"[2026-11-20 10:20:05,000] step 5\n[rank2]: {ILLEGAL_ADDRESS}\n")
    # n8's GPU at 0000:06:00 fell off the bus under dave's job (his rank reported it);
    # erin's job on the node's other GPUs ran into its time limit 40 s later.
    (logs / "n8.log").write_text(syslog("n8", ("10:05:00", f"kernel: {XID_79}")))
    (logs / "slurm-508.out").write_text(f"[2026-11-20 10:05:01,000] step 5\n[rank0]: {LAUNCH_FAILURE}\n")
    (logs / "slurm-509.out").write_text("[2026-11-20 10:04:00,000] step 51000\nslurmstepd: error: *** JOB 509 ON n8 "
                                        "CANCELLED AT 2026-11-20T10:05:38 DUE TO TIME LIMIT ***\n")
    # Two MIG slices of n9's one GPU: both jobs' ranks saw it go, however each put it.
    (logs / "n9.log").write_text(syslog("n9", ("10:06:00", f"kernel: {XID_79}")))
    (logs / "slurm-510.out").write_text(f"[2026-11-20 10:06:01,000] step 5\n[rank0]: {LAUNCH_FAILURE}\n")
    (logs / "slurm-511.out").write_text(f"[2026-11-20 10:06:02,000] step 5\n[rank0]: {UNKNOWN_ERROR}\n")
    # n10's GPU fell off the bus under hal's job, whose rank on it hung silently; ivy's job,
    # started after, found the GPU missing: the fault is still hal's job's root.
    (logs / "n10.log").write_text(syslog("n10", ("10:06:00", f"kernel: {XID_79}")))
    (logs / "slurm-512.out").write_text(f"[2026-11-20 10:05:00,000] step 5\n{watchdog_timeout(1, '10:16:01')}\n")
    (logs / "slurm-513.out").write_text(f"[2026-11-20 10:20:05,000] step 0\n[rank0]: {INVALID_ORDINAL}\n")
    # The same, but jan's rank reported the GPU going: kim's job still found it missing.
    (logs / "n11.log").write_text(syslog("n11", ("10:06:00", f"kernel: {XID_79}")))
    (logs / "slurm-514.out").write_text(f"[2026-11-20 10:06:01,000] step 5\n[rank0]: {LAUNCH_FAILURE}\n")
    (logs / "slurm-515.out").write_text(f"[2026-11-20 10:30:05,000] step 0\n[rank0]: {INVALID_ORDINAL}\n")
    # n12's GPU at 0000:07:00 had a double-bit error under max's job, whose rank reported
    # it; lea's job on other GPUs of the node ran out of memory in the same second.
    (logs / "n12.log").write_text(syslog("n12", ("10:06:00", f"kernel: {XID_48}")))
    (logs / "slurm-516.out").write_text(f"[2026-11-20 10:06:00,000] step 5\n[rank0]: {CUDA_OOM}\n")
    (logs / "slurm-517.out").write_text(f"[2026-11-20 10:06:00,000] step 5\n[rank0]: {ECC_ERROR}\n")
    # n13's kernel killed a monitoring agent (no cgroup named) 34 minutes before ned's job
    # ran out of GPU memory: the victim line and the reaper's (mm/oom_kill.c).
    (logs / "n13.log").write_text(syslog(
        "n13", ("10:10:00", "kernel: Out of memory: Killed process 2110 (node_exporter) total-vm:1130073kB, "
                            "anon-rss:524288kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4157kB oom_score_adj:0"),
        ("10:10:00", "kernel: oom_reaper: reaped process 2110 (node_exporter), now anon-rss:0kB, file-rss:0kB, "
                     "shmem-rss:0kB")))
    (logs / "slurm-518.out").write_text(f"[2026-11-20 10:05:00,000] {ITERATION}\n[2026-11-20 10:44:00,000] {CUDA_OOM}\n")
    # n14 is shared: pat's simulator segfaulted at 10:10 and its job ended; olga's notebook
    # ran on until its time limit at 10:50 (the kernel's report, arch/x86/mm/fault.c's form
    # as leptonai/gpud's matcher quotes it).
    (logs / "n14.log").write_text(syslog("n14", ("10:10:00", "kernel: python[836469]: segfault at 8 ip 00007fa1d3b2e4c7 "
                                                             "sp 00007ffc8e21b5d0 error 4 in libmujoco.so.3.2.2[7fa1d3a00000+200000]")))
    (logs / "slurm-519.out").write_text(f"[2026-11-20 10:30:00,000] {ITERATION}\nslurmstepd: error: *** JOB 519 ON n14 "
                                        "CANCELLED AT 2026-11-20T10:49:58 DUE TO TIME LIMIT ***\n")
    (logs / "slurm-520.out").write_text(f"[2026-11-20 10:09:00,000] {ITERATION}\n")
    # 521: a Ray actor's own report of its segfault (abseil's failure signal handler, as
    # ray-project/ray#19967 shows it), unstamped below unstamped step lines: it inherited
    # the 09:05 stamp, but can have been printed up to the driver's error at 10:25.
    (logs / "slurm-521.out").write_text(
        "2026-11-20 09:05:00,000\tINFO worker.py:1918 -- Connected to Ray cluster.\n"
        + "".join(f"(TaskRunner pid=329821) step:{i} - actor/pg_loss:0.0477\n" for i in range(1, 40))
        + "(PolicyModelActor pid=198350) *** SIGSEGV received at time=1795688700 on cpu 0 ***\n"
        "2026-11-20 10:25:00,207\tERROR worker.py:421 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
        "The worker died unexpectedly while executing this task.\n")
    for job in ("501", "503"):  # output that says nothing of the fault: coverage is complete
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_an_oom_kill_before_the_start_is_the_previous_jobs(verdicts):
    assert verdicts["500"]["cause"] == "workload.cuda_oom"
    assert verdicts["500"]["quality"] != "ambiguous" and not verdicts["500"]["alternatives"]


def test_an_oom_kill_during_the_attempt_is_its_root(verdicts):
    assert (verdicts["501"]["domain"], verdicts["501"]["cause"]) == ("host", "host.oom_killer")


def test_an_xid_13_before_the_start_is_the_previous_jobs(verdicts):
    assert verdicts["504"]["cause"] == "workload.cuda_oom"


def test_a_power_off_before_the_start_is_the_previous_boot(verdicts):
    assert verdicts["502"]["cause"] == "workload.cuda_oom"


def test_a_power_off_during_the_attempt_is_its_root(verdicts):
    assert (verdicts["503"]["domain"], verdicts["503"]["cause"]) == ("host", "host.node_power_off")
    assert verdicts["503"]["culprit_nodes"] == ["n4"]
    assert verdicts["503"]["quality"] == "definitive"  # NODE_FAIL corroborates a host root


def test_an_xid_13_the_job_outlived_is_the_other_jobs_on_the_node(verdicts):
    """Two hours after the XID 13 the job still trained: the process it ended was another
    job's on the four other GPUs."""
    assert verdicts["505"]["cause"] == "scheduler.time_limit"


def test_an_xid_13_another_job_on_the_node_reported_is_that_jobs(verdicts):
    """Carol's rank reported the fault the XID is the kernel's report of; bob's job beside
    it on the node failed of its own exception."""
    assert (verdicts["507"]["cause"], verdicts["507"]["culprit_ranks"]) == ("workload.gpu_illegal_address", [2])
    bob = verdicts["506"]
    assert bob["cause"] == "workload.exception"
    assert [e["role"] for e in bob["evidence"] if e["event"].startswith("xid_13")] == ["context"]


def test_a_gpu_another_job_on_the_node_lost_is_not_this_jobs_root(verdicts):
    """dave's rank reported the GPU that fell off the bus; erin's job, on other GPUs of the
    node, ran into its time limit: that is its verdict, not the neighbour's GPU."""
    assert (verdicts["508"]["domain"], verdicts["508"]["culprit_nodes"]) == ("gpu", ["n8"])
    assert (verdicts["509"]["domain"], verdicts["509"]["cause"]) == ("scheduler", "scheduler.time_limit")


def test_a_gpu_two_jobs_shared_is_both_jobs_root(verdicts):
    """Two MIG slices of one GPU: one rank's error confirms the XID, the other's ("unknown
    error") does not, yet it was on that GPU too."""
    for job in ("510", "511"):
        assert (verdicts[job]["domain"], verdicts[job]["cause"], verdicts[job]["culprit_nodes"]) == (
            "gpu", "gpu.fallen_off_bus", ["n9"])


def test_the_next_job_finding_the_gpu_gone_does_not_take_the_fault_from_the_job_it_struck(verdicts):
    assert (verdicts["512"]["domain"], verdicts["512"]["culprit_nodes"]) == ("gpu", ["n10"])
    assert (verdicts["513"]["domain"], verdicts["513"]["culprit_nodes"]) == ("gpu", ["n10"])


def test_the_job_a_gpu_fault_struck_does_not_take_it_from_the_next_job_that_found_it_gone(verdicts):
    assert (verdicts["514"]["domain"], verdicts["514"]["culprit_nodes"]) == ("gpu", ["n11"])
    assert (verdicts["515"]["domain"], verdicts["515"]["culprit_nodes"]) == ("gpu", ["n11"])


def test_running_out_of_memory_beside_a_neighbours_gpu_fault_is_the_jobs_own(verdicts):
    """A CUDA out-of-memory error is a weak claim on an XID of its node: max's rank raised
    the ECC error the fault itself raises, so the XID is his job's; lea's job ran out of
    memory on its own."""
    assert (verdicts["517"]["domain"], verdicts["517"]["culprit_nodes"]) == ("gpu_memory", ["n12"])
    assert (verdicts["516"]["cause"], verdicts["516"]["culprit_nodes"]) == ("workload.cuda_oom", [])


def test_an_oom_kill_the_job_ran_on_long_after_is_not_its_root(verdicts):
    v = verdicts["518"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])


def test_a_neighbours_segfault_the_job_ran_on_long_after_is_not_its_root(verdicts):
    assert (verdicts["519"]["domain"], verdicts["519"]["cause"]) == ("scheduler", "scheduler.time_limit")
    assert (verdicts["520"]["domain"], verdicts["520"]["cause"]) == ("workload", "workload.segfault")


def test_an_unstamped_segfault_report_the_job_died_of_is_its_root(verdicts):
    """The process's own report names no pid the kernel killed, and an inherited stamp is
    only the earliest it can have been printed."""
    assert (verdicts["521"]["domain"], verdicts["521"]["cause"]) == ("workload", "workload.segfault")
