"""Operators and their tools acting on nodes under running jobs, end to end through the
Slurm connector, the files landing and a run: a node someone set DOWN (slurmctld's
``update_node`` lines) is the operator's doing, not the node's fault, unless the node
reported a fault first, NHC gave its failed check as the reason, or a cloud's resume program
gave the instance it could not launch; a slurmd someone stopped is the same (sudo, slurmd or
systemd saying so), while a slurmd restart the job outlived, a stop before it started, or
one the node's announced reboot made, is not the operator's; an NHC process check (a system service not running) does not end a job; and
a generic exception does not confirm another line's fault because its unknown stamp spans
it, while it does confirm the one printed with it."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import BOOT, CUDA_OOM, ITERATION, XID_79, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
930|930|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:41:12|n[1-2]|gres/gpu=16,node=2
931|931|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:32:37|n[3-4]|gres/gpu=16,node=2
932|932|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:50:00|n[5-6]|gres/gpu=16,node=2
933|933|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T10:06:20|n[7-8]|gres/gpu=16,node=2
934|934|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T10:30:00|n9|gres/gpu=8,node=1
935|935|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:41:30|n[10-11]|gres/gpu=16,node=2
936|936|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:20:30|n[12-13]|gres/gpu=16,node=2
937|937|train|alice|NODE_FAIL|0:0|2026-11-20T09:55:00|2026-11-20T10:13:46|od-dy-p5-[1-2]|gres/gpu=16,node=2
938|938|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:35:00|n[14-15]|gres/gpu=16,node=2
939|939|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T08:00:40|n16|gres/gpu=8,node=1
940|940|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:26:00|n[17-18]|gres/gpu=16,node=2
"""

# slurmctld/node_mgr.c update_node(): "%s: node %s reason set to: %s", "… state set to %s".
CTLD = (
    # 930: an operator took a healthy node for a reimage.
    "[2026-11-20T09:41:12.000] update_node: node n2 reason set to: reimage to ubuntu22.04 (mej)\n"
    "[2026-11-20T09:41:12.000] update_node: node n2 state set to DOWN\n"
    # 931: NHC's node-mark-offline gave its failed GPU check as the reason (mej/nhc helpers).
    "[2026-11-20T09:32:37.000] update_node: node n4 reason set to: NHC: check_nv_healthmon:  "
    "nvidia-smi:  Unable to determine the device handle for GPU 0000:06:00.0: GPU is lost\n"
    "[2026-11-20T09:32:37.000] update_node: node n4 state set to DOWN\n"
    # 932: the node lost its GPU, then the operator took it out.
    "[2026-11-20T09:49:58.000] update_node: node n6 state set to DOWN\n"
    # 933: slurmd stopped on n8; slurmctld set it down after SlurmdTimeout (ping_nodes.c).
    "[2026-11-20T10:06:18.000] error: Nodes n8 not responding, setting DOWN\n"
    # 938: slurmd stopped on n15 (only systemd said so); DOWN after SlurmdTimeout.
    "[2026-11-20T09:31:40.000] error: Nodes n15 not responding\n"
    "[2026-11-20T09:35:00.000] error: Nodes n15 not responding, setting DOWN\n"
    # 937: AWS ParallelCluster's resume program found no capacity for od-dy-p5-2's instance
    # (the reason its fast insufficient-capacity fail-over guide quotes) and set it DOWN.
    "[2026-11-20T10:13:46.000] update_node: node od-dy-p5-2 reason set to: (Code:InsufficientInstanceCapacity)"
    "Failure when resuming nodes\n"
    "[2026-11-20T10:13:46.000] update_node: node od-dy-p5-2 state set to DOWN\n"
)
# slurmstepd's banner of an attempt lost to a node (slurmstepd/req.c), on the batch host.
NODE_FAILURE_BANNER = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T{clock} DUE TO NODE FAILURE ***\n"
# sudo's log of the command (sudo lib/eventlog/eventlog.c), and slurmd's last line (slurmd.c).
SUDO_STOP = "sudo[61022]:    ops2 : TTY=pts/1 ; PWD=/root ; USER=root ; COMMAND=/usr/bin/systemctl stop slurmd"
SLURMD_DONE = "slurmd[2011]: Slurmd shutdown completing"
# systemd's stop of the unit (Slurm's slurmd.service: Description=Slurm node daemon).
SYSTEMD_STOP = ("systemd[1]: Stopping Slurm node daemon...", "systemd[1]: slurmd.service: Deactivated successfully.",
                "systemd[1]: Stopped Slurm node daemon.")
# https://github.com/mej/nhc (its test fixture of check_ps_service's message)
NHC_SERVICE = ("nhc[5120]: Health check failed:  check_ps_service:  Service chronyd (process chronyd) "
               "owned by chrony not running; start in progress")
# https://github.com/kangear/tiny210v2-uboot/issues/5
NFS_DOWN = "kernel: nfs: server 192.168.1.229 not responding, still trying"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("operations")
    logs = root / "logs"
    logs.mkdir()
    for job, batch, end in (("930", "n1", "09:41:14"), ("931", "n3", "09:32:39"), ("932", "n5", "09:50:00"),
                            ("933", "n7", "10:06:20"), ("938", "n14", "09:35:00"), ("940", "n17", "09:26:00")):
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 09:00:00,000] {ITERATION}\n" + NODE_FAILURE_BANNER.format(job=job, node=batch, clock=end))
    (logs / "n6.log").write_text(syslog("n6", ("09:45:00", f"kernel: {XID_79}")))
    (logs / "n8.log").write_text(syslog("n8", ("10:00:37", SUDO_STOP), ("10:00:40", SLURMD_DONE)))
    (logs / "n15.log").write_text(syslog("n15", *(("09:30:02", line) for line in SYSTEMD_STOP)))
    # 939: n16 was rebooted for maintenance before the job (its slurmd stopped with it);
    # the job then ran out of GPU memory at once.
    (logs / "n16.log").write_text(syslog(
        "n16", *(("07:38:00", line) for line in SYSTEMD_STOP), ("07:40:55", f"kernel: {BOOT}"),
        ("07:41:30", "systemd[1]: Started Slurm node daemon.")))
    (logs / "slurm-939.out").write_text(f"[2026-11-20 08:00:35,000] {CUDA_OOM}\n")
    # 940: unattended upgrades rebooted n18 mid-job: logind announced it (systemd#1421's
    # line), systemd stopped slurmd with everything else, and the node booted again.
    (logs / "n18.log").write_text(syslog(
        "n18", ("09:20:00", "systemd-logind[1520]: System is rebooting."), ("09:20:01", SYSTEMD_STOP[0]),
        ("09:23:00", f"kernel: {BOOT}")))
    # 934: slurmd restarted at 08:30 (a package upgrade); the job ran on two hours, then
    # ran out of GPU memory.
    (logs / "n9.log").write_text(syslog(
        "n9", *(("08:30:00", line) for line in (*SYSTEMD_STOP, SLURMD_DONE)),
        ("08:30:02", "systemd[1]: Started Slurm node daemon."), ("08:30:02", "slurmd[3012]: slurmd started")))
    (logs / "slurm-934.out").write_text(f"[2026-11-20 10:00:00,000] {ITERATION}\n[2026-11-20 10:29:50,000] {CUDA_OOM}\n")
    # 935: rank 0 died of its own KeyError, unstamped after an iteration line at 09:36; NHC
    # found chronyd down on n11 at 09:38, and n11's NFS client lost its server at 09:39.
    (logs / "slurm-935.out").write_text(
        f"0: [2026-11-20 09:36:00,000] {ITERATION}\n"
        "0: Traceback (most recent call last):\n"
        "0:   File \"/work/ppo/rollout.py\", line 88, in collect\n"
        "0: KeyError: 'reward_scores'\n"
        "0: [2026-11-20 09:41:26,000] srun: error: n10: task 0: Exited with exit code 1\n")
    (logs / "n11.log").write_text(syslog("n11", ("09:38:00", NHC_SERVICE), ("09:39:00", NFS_DOWN)))
    # 936: one rank's checkpoint write hit the quota; every rank raised DCP's
    # CheckpointException around it (torch/distributed/checkpoint/utils.py), one traceback
    # block under the same inherited stamp.
    (logs / "slurm-936.out").write_text(
        f"0: [2026-11-20 09:20:00,000] {ITERATION}\n"
        "8: [rank8]: OSError: [Errno 122] Disk quota exceeded\n"
        "0: [rank0]: torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([8])\n"
        "0: [2026-11-20 09:20:25,000] srun: error: n12: task 0: Exited with exit code 1\n")
    ctld = root / "ctld"
    ctld.mkdir()
    (ctld / "slurmctld.log").write_text(CTLD)
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), more=((ctld / "slurmctld.log", {"node": "ctl1"}),))


def test_a_node_an_operator_set_down_is_the_operators_doing(verdicts):
    v = verdicts["930"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.node_set_down", [])
    # Slurm's NODE_FAIL and its banner are what followed, not a rival fault.
    assert v["quality"] != "ambiguous" and not v["alternatives"]
    assert role_of(v, "scheduler.slurm_cancelled_node_failure") == "cascade"


def test_a_node_the_cloud_could_not_launch_is_no_operators_doing_and_no_nodes_fault(verdicts):
    v = verdicts["937"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.boot_failure", [])
    assert role_of(v, "scheduler.node_set_down") == "confirmation"


def test_a_node_nhc_set_down_is_the_check_it_failed(verdicts):
    v = verdicts["931"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.health_check_failed", ["n4"])
    assert role_of(v, "scheduler.node_set_down") == "confirmation"


def test_a_fault_the_node_reported_before_the_operator_set_it_down_is_the_root(verdicts):
    v = verdicts["932"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n6"])


def test_a_slurmd_someone_stopped_under_a_job_is_the_operators_doing(verdicts):
    v = verdicts["933"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.slurmd_stopped", [])
    assert role_of(v, "scheduler.slurmctld_node_not_responding") == "cascade"


def test_a_slurmd_only_systemd_says_was_stopped_is_the_operators_doing_too(verdicts):
    v = verdicts["938"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.slurmd_stopped", [])
    assert v["first_fault_ts"].strftime("%H:%M:%S") == "09:30:02"


def test_a_slurmd_stopped_by_the_nodes_announced_reboot_is_the_reboots(verdicts):
    v = verdicts["940"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n18"])
    assert role_of(v, "scheduler.slurmd_stopped") == "confirmation"


def test_a_slurmd_stopped_before_the_job_started_did_not_end_it(verdicts):
    v = verdicts["939"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.cuda_oom")
    assert role_of(v, "scheduler.slurmd_stopped") == "context"


def test_a_slurmd_restart_the_job_outlived_did_not_end_it(verdicts):
    v = verdicts["934"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.cuda_oom")
    assert role_of(v, "scheduler.slurmd_stopped") == "context"


def test_a_service_nhc_found_down_does_not_end_a_job(verdicts):
    v = verdicts["935"]
    assert role_of(v, "host.nhc_check_failed") == "context"
    assert (v["domain"], v["cause"]) != ("host", "host.health_check_failed")


def test_an_exception_is_not_the_report_of_another_lines_fault(verdicts):
    # The KeyError may have been printed any time from 09:36 to 09:41:26: its span covers
    # the NFS outage on n11, but it is its own failure, not that outage's report.
    v = verdicts["935"]
    assert role_of(v, "framework.python_exception") != "confirmation"


def test_an_exception_printed_with_an_infrastructure_error_confirms_it(verdicts):
    v = verdicts["936"]
    assert (v["domain"], v["cause"]) == ("storage", "storage.quota_exceeded")
    assert role_of(v, "framework.python_exception") == "confirmation"
