"""What Slurm's own lines say about why an attempt ended, end to end through the Slurm
connector, the files landing and a run: a bare cancellation banner yields to the reason
sacct's state gives (DEADLINE), slurmctld's ResumeTimeout line names the cloud node that
never booted for a BOOT_FAIL attempt of several nodes (in the controller's syslog or in
slurmctld's own log file), the nodes it lists together as down are each named, and the job
script's own ``timeout --verbose`` is the workload's limit, not an unexplained exit 137, and so
is a silent ``timeout`` whose exit 124 the script passed on."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, role_of, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
910|910|train|alice|DEADLINE|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n1|gres/gpu=8,node=1
911|911|train|alice|BOOT_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T08:10:05|n[2-3]|gres/gpu=16,node=2
912|912|train|alice|FAILED|137:0|2026-11-20T08:00:00|2026-11-20T09:30:00|n4|gres/gpu=8,node=1
913|913|train|alice|CANCELLED by 1000|0:15|2026-11-20T08:00:00|2026-11-20T09:00:00|n5|gres/gpu=8,node=1
914|914|train|alice|BOOT_FAIL|0:0|2026-11-20T08:30:00|2026-11-20T08:40:03|n[6-7]|gres/gpu=16,node=2
915|915|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T08:51:40|n[8-10]|gres/gpu=24,node=3
916|916|train|alice|FAILED|124:0|2026-11-20T08:00:00|2026-11-20T09:30:05|n[11-12]|gres/gpu=16,node=2
917|917|train|alice|FAILED|124:0|2026-11-20T08:00:00|2026-11-20T08:20:05|n13|gres/gpu=8,node=1
918|918|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:30:05|n[14-15]|gres/gpu=16,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("reasons")
    logs = root / "logs"
    logs.mkdir()
    # slurmstepd's banner without a reason (slurmstepd/req.c), as bcbio/bcbio-nextgen#741
    # shows it; sacct says DEADLINE: the reason is the deadline, not a user.
    banner = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T09:00:00 ***\n"
    (logs / "slurm-910.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n"
                                        + banner.format(job=910, node="n1"))
    # The same banner of an attempt a user cancelled: that is its reason.
    (logs / "slurm-913.out").write_text(f"0: [2026-11-20 08:40:00,000] {ITERATION}\n"
                                        + banner.format(job=913, node="n5"))
    # The controller's syslog: n3 never registered after its resume (slurmctld/power_save.c).
    (logs / "ctl1.log").write_text(syslog(
        "ctl1", ("08:00:02", "slurmctld[1201]: sched: Allocate JobId=911 NodeList=n[2-3] #CPUs=192 Partition=gpu"),
        ("08:04:10", "slurmctld[1201]: Node n2 now responding"),
        ("08:10:04", "slurmctld[1201]: node n3 not resumed by ResumeTimeout(600) - marking down and power_save"),
        # A rack lost power: slurmctld names the nodes that went down together as one
        # hostlist (ping_nodes.c: "Nodes %s not responding, setting DOWN").
        ("08:51:39", "slurmctld[1201]: error: Nodes n[8-9] not responding, setting DOWN")))
    # coreutils' timeout.c: "sending signal %s to command %s", quoted ‘…’ in a UTF-8 locale.
    (logs / "slurm-912.out").write_text(f"0: [2026-11-20 09:20:00,000] {ITERATION}\n"
                                        "timeout: sending signal KILL to command ‘srun’\n"
                                        "srun: error: n4: task 0: Killed\n")
    # 916: `timeout 5400 srun …` without --verbose: the step torn down, the script's exit 124.
    # 918: the same teardown with the script's exit 1: nothing says why.
    for job, first, second in (("916", "n11", "n12"), ("918", "n14", "n15")):
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 09:25:00,000] {ITERATION}\nsrun: forcing job termination\n"
            f"slurmstepd: error: *** STEP {job}.0 ON {first} CANCELLED AT 2026-11-20T09:30:03 ***\n"
            f"srun: error: {first}: tasks 0-7: Terminated\nsrun: error: {second}: tasks 8-15: Terminated\n")
    # 917: the job ran out of GPU memory, and its script happened to exit 124.
    (logs / "slurm-917.out").write_text(f"0: [2026-11-20 08:20:00,000] {CUDA_OOM}\n")
    # The same report in slurmctld's own log file (SlurmctldLogFile, LogTimeFormat
    # iso8601_ms), landed for its host: Slurm ≥ 23.02's wording.
    ctld = root / "ctld"
    ctld.mkdir()
    (ctld / "slurmctld.log").write_text(
        "[2026-11-20T08:30:01.020] sched: Allocate JobId=914 NodeList=n[6-7] #CPUs=192 Partition=gpu\n"
        "[2026-11-20T08:40:02.611] error: node n6 not resumed by ResumeTimeout(600), setting DOWN and POWERED_DOWN\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20),
                           more=((ctld / "slurmctld.log", {"node": "ctl1"}),))


def test_a_bare_cancellation_yields_to_the_deadline_sacct_records(verdicts):
    v = verdicts["910"]
    assert (v["domain"], v["cause"]) == ("scheduler", "scheduler.deadline")


def test_a_bare_cancellation_of_a_cancelled_attempt_stays_its_reason(verdicts):
    v = verdicts["913"]
    assert (v["domain"], v["cause"]) == ("scheduler", "scheduler.cancelled")
    assert role_of(v, "scheduler.slurm_cancelled_by_user") == "root_candidate"


def test_slurmctld_names_the_node_that_did_not_boot(verdicts):
    v = verdicts["911"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.boot_failure", ["n3"])


def test_slurmctlds_own_log_file_names_it_too(verdicts):
    v = verdicts["914"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.boot_failure", ["n6"])


def test_nodes_slurmctld_lists_together_are_each_named(verdicts):
    v = verdicts["915"]
    assert (v["domain"], v["culprit_nodes"]) == ("host", ["n8", "n9"])


def test_the_job_scripts_own_timeout_is_the_workloads_limit(verdicts):
    v = verdicts["912"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.command_timeout")
    assert v["culprit_nodes"] == []


def test_a_silent_timeout_is_read_from_the_scripts_exit_124(verdicts):
    v = verdicts["916"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.command_timeout", "probable")
    assert v["culprit_nodes"] == []


def test_exit_124_does_not_replace_a_root_the_logs_give(verdicts):
    assert verdicts["917"]["cause"] == "workload.cuda_oom"


def test_a_teardown_with_another_exit_code_stays_unexplained(verdicts):
    assert verdicts["918"]["domain"] == "unknown"
