"""A fault the job restarted from inside its allocation (torchrun ``--max-restarts``) and then
kept working after is not what ended it (``rules/restarted.py``): the later fault is, or the
time limit; a restart that failed again at once keeps the earlier root. A job script that
runs ``srun`` again prints no restart line: Slurm's steps say it relaunched. Real lines,
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, XID_79, syslog, verdicts_by_job
from tests.test_earlier_outage import LINK_DOWN, LINK_UP
from tests.test_ib_peer import retry_exceeded

# torch/distributed/elastic/agent/server/api.py (the agent's restart, glog-stamped by torchrun)
RESTART = ("I1120 {clock}.574000 140331 torch/distributed/elastic/agent/server/api.py:879] [default] Worker group "
           "FAILED. 1/1 attempts left; will restart worker group")
# slurmstepd's banners (https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c)
TIME_LIMIT = "slurmstepd: error: *** JOB 842 ON r5 CANCELLED AT 2026-11-20T14:00:00 DUE TO TIME LIMIT ***"
NODE_FAILURE = ("slurmstepd: error: *** JOB 843 ON r7 CANCELLED AT 2026-11-20T10:40:00 DUE TO NODE FAILURE, "
                "SEE SLURMCTLD LOG FOR DETAILS ***")
# https://lore.kernel.org/r/1609794955-3661-1-git-send-email-william.roche@oracle.com (a fatal machine check)
MCE_PANIC = "kernel: [  236.731950] Kernel panic - not syncing: Fatal machine check"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
840|840|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T12:01:00|r[1-2]|gres/gpu=16,node=2
841|841|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:13:00|r[3-4]|gres/gpu=16,node=2
842|842|train|alice|TIMEOUT|0:0|2026-11-20T10:00:00|2026-11-20T14:00:30|r[5-6]|gres/gpu=16,node=2
843|843|train|alice|NODE_FAIL|0:0|2026-11-20T10:00:00|2026-11-20T10:40:00|r[7-8]|gres/gpu=16,node=2
844|844|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T12:01:00|r[9-10]|gres/gpu=16,node=2
844.batch|844.batch|batch||FAILED|1:0|2026-11-20T10:00:00|2026-11-20T12:01:00|r9|gres/gpu=8,node=1
844.0|844.0|torchrun||FAILED|1:0|2026-11-20T10:00:02|2026-11-20T10:10:40|r[9-10]|gres/gpu=16,node=2
844.1|844.1|torchrun||FAILED|1:0|2026-11-20T10:11:10|2026-11-20T12:01:00|r[9-10]|gres/gpu=16,node=2
845|845|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T12:01:00|r[11-12]|gres/gpu=16,node=2
845.0|845.0|torchrun||FAILED|1:0|2026-11-20T10:00:02|2026-11-20T12:01:00|r[11-12]|gres/gpu=16,node=2
845.1|845.1|monitor||CANCELLED|0:15|2026-11-20T10:20:00|2026-11-20T12:01:00|r[11-12]|gres/gpu=16,node=2
"""


def _flap_then_restart(node: str, peer: str) -> tuple[str, str]:
    """``node``'s syslog with its port's flap at 10:10, and the job output's NCCL error on
    ``peer`` about it and the agent's restart half a minute later."""
    log = syslog(node, ("10:05:00", "kernel: ok"), ("10:10:00", LINK_DOWN), ("10:10:05", LINK_UP))
    output = (f"0: [2026-11-20 10:09:00,000] {ITERATION}\n{retry_exceeded(3, peer, '10.22.0.5')}\n"
              f"{RESTART.format(clock='10:10:30')}\n")
    return log, output


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("restarted")
    logs = root / "logs"
    logs.mkdir()
    # 840: r1's port flapped at 10:10, the job restarted and trained two more hours, until
    # r2's GPU fell off the bus.
    log, output = _flap_then_restart("r1", "r2")
    (logs / "r1.log").write_text(log)
    (logs / "r2.log").write_text(syslog("r2", ("10:05:00", "kernel: ok"), ("12:00:00", f"kernel: {XID_79}")))
    (logs / "slurm-840.out").write_text(output + f"0: [2026-11-20 11:59:00,000] {ITERATION}\n")
    # 841: r4's GPU fell off the bus at 10:10, the restart died on it at once.
    (logs / "r3.log").write_text(syslog("r3", ("10:05:00", "kernel: ok"), ("10:12:00", "kernel: ok")))
    (logs / "r4.log").write_text(syslog("r4", ("10:05:00", "kernel: ok"), ("10:10:00", f"kernel: {XID_79}")))
    (logs / "slurm-841.out").write_text(
        f"0: [2026-11-20 10:09:00,000] {ITERATION}\n{RESTART.format(clock='10:10:30')}\n"
        f"{retry_exceeded(3, 'r3', '10.22.0.9')}\n")
    # 842: r5's port flapped, the job restarted and ran until its time limit.
    log, output = _flap_then_restart("r5", "r6")
    (logs / "r5.log").write_text(log + syslog("r5", ("13:00:00", "kernel: ok")))
    (logs / "r6.log").write_text(syslog("r6", ("10:05:00", "kernel: ok"), ("13:00:00", "kernel: ok")))
    (logs / "slurm-842.out").write_text(output + f"0: [2026-11-20 13:59:00,000] {ITERATION}\n{TIME_LIMIT}\n")
    # 843: r8's CPU failed at 10:10 and its node panicked; the restarted workers waited for
    # it until Slurm declared the node failed.
    (logs / "r7.log").write_text(syslog("r7", ("10:05:00", "kernel: ok"), ("10:30:00", "kernel: ok")))
    (logs / "r8.log").write_text(syslog("r8", ("10:05:00", "kernel: ok"), ("10:10:00", MCE_PANIC)))
    (logs / "slurm-843.out").write_text(
        f"0: [2026-11-20 10:09:00,000] {ITERATION}\n{retry_exceeded(3, 'r7', '10.22.0.8')}\n"
        f"{RESTART.format(clock='10:10:30')}\n{NODE_FAILURE}\n")
    # 844: the script's retry loop ran srun again after r9's port flapped (step 844.1),
    # which trained two more hours until r10's GPU fell off the bus; no restart line.
    # 845: the same faults under one training step, beside a monitoring step started later:
    # no relaunch, the flap stays what the job saw first.
    for job, (node, peer) in {"844": ("r9", "r10"), "845": ("r11", "r12")}.items():
        log, output = _flap_then_restart(node, peer)
        (logs / f"{node}.log").write_text(log)
        (logs / f"{peer}.log").write_text(syslog(peer, ("10:05:00", "kernel: ok"), ("12:00:00", f"kernel: {XID_79}")))
        without_restart = "".join(line + "\n" for line in output.splitlines() if "will restart" not in line)
        (logs / f"slurm-{job}.out").write_text(without_restart + f"0: [2026-11-20 11:59:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_fault_after_the_restart_ended_the_attempt(verdicts):
    v = verdicts["840"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["alternatives"]) == ("gpu", "gpu.fallen_off_bus", ["r2"], [])


def test_a_restart_that_failed_at_once_keeps_the_fault_before_it(verdicts):
    v = verdicts["841"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["r4"])


def test_a_restart_then_hours_of_training_until_the_time_limit_is_the_time_limit(verdicts):
    v = verdicts["842"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("scheduler", "scheduler.time_limit", [])


def test_a_node_failing_before_the_restart_and_lost_after_it_is_one_failure(verdicts):
    v = verdicts["843"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.machine_check", ["r8"])


def test_a_script_that_ran_srun_again_restarted_the_job(verdicts):
    v = verdicts["844"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["r10"])


def test_a_step_beside_the_running_one_is_no_restart(verdicts):
    v = verdicts["845"]
    assert v["domain"] == "network" and "r11" in v["culprit_nodes"]
