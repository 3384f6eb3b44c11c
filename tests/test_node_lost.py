"""The ``node_lost`` python rule, end to end: a node of a NODE_FAIL attempt that booted soon
after the attempt ended, or reported a stalled CPU while it ran, is the node Slurm lost; a
boot hours later, a stall after the end, or neither, names no one. slurmctld's own report
names the node it set DOWN, wherever its log was landed from, and so does its report of a
node not responding that did not answer again. Real boot lines, landed
through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, BOOT, ITERATION, role_of, syslog, verdicts_by_job, watchdog_timeout
from tests.test_ib_peer import bootstrap, retry_exceeded

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[1-2]|gres/gpu=16,node=2
701|701|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[3-4]|gres/gpu=16,node=2
702|702|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[5-6]|gres/gpu=16,node=2
703|703|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[7-8]|gres/gpu=16,node=2
704|704|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[9-10]|gres/gpu=16,node=2
705|705|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[11-12]|gres/gpu=16,node=2
706|706|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T08:15:00|n[13-15]|gres/gpu=24,node=3
707|707|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T08:40:00|n[16-18]|gres/gpu=24,node=3
708|708|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T08:40:00|n[19-21]|gres/gpu=24,node=3
709|709|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[22-23]|gres/gpu=16,node=2
710|710|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[24-25]|gres/gpu=16,node=2
711|711|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T09:00:00|n[26-27]|gres/gpu=16,node=2
712|712|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T08:45:00|n[28-29]|gres/gpu=16,node=2
713|713|train|alice|NODE_FAIL|0:0|2026-11-20T08:00:00|2026-11-20T08:45:00|n[30-31]|gres/gpu=16,node=2
"""
# tree_stall.h's report, as cilium/tetragon#328 shows it
RCU_STALL = "kernel: [  103.087243] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:"
# NCCL's retry-exceeded report of a survivor, as test_files_parsers has it, naming the lost node.
RETRY_EXCEEDED = ("{r}: {node}:3468:3905 [3] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
                  "10.216.210.236<54862> with status=12 opcode=32616 len=0 vendor err 129 (Recv)")
# slurmctld.log, as clustervision/trinity#506 shows it
CTLD = """[2026-11-20T08:57:20.846] error: Nodes n12 not responding
[2026-11-20T09:00:00.284] error: Nodes n12 not responding, setting DOWN
[2026-11-20T08:59:59.120] error: Nodes n27 not responding, setting DOWN
[2026-11-20T08:40:20.118] error: Nodes n29 not responding
[2026-11-20T08:20:20.118] error: Nodes n31 not responding
[2026-11-20T08:21:02.953] Node n31 now responding
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost")
    logs = root / "logs"
    logs.mkdir()
    for node in ("n1", "n3", "n5", "n6", "n7", "n9"):
        (logs / f"{node}.log").write_text(syslog(node, ("07:50:00", ALIVE), ("09:30:00", ALIVE)))
    # n2 went silent during job 700 and booted 25 minutes after Slurm gave up on it.
    (logs / "n2.log").write_text(syslog("n2", ("07:50:00", ALIVE), ("09:25:00", f"kernel: {BOOT}")))
    # n4 booted too, but three hours after job 701 ended: maintenance, not this failure.
    (logs / "n4.log").write_text(syslog("n4", ("07:50:00", ALIVE), ("12:00:00", f"kernel: {BOOT}")))
    # n8 reported a stalled CPU during job 703 and was never heard of again: it hung.
    (logs / "n8.log").write_text(syslog("n8", ("07:50:00", ALIVE), ("08:40:00", RCU_STALL)))
    # n10's stall came after job 704 had ended: not what ended it.
    (logs / "n10.log").write_text(syslog("n10", ("07:50:00", ALIVE), ("09:10:00", RCU_STALL)))
    # n11 and n12 left no log of their own; the controller's names n12.
    ctld = root / "slurmctld.log"
    ctld.write_text(CTLD)
    for job in ("700", "701", "702", "703", "704", "705"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 08:10:00,000] {ITERATION}\n")
    # A survivor on n11 lost its peer on n12 (the NCCL line of test_files_parsers).
    with (logs / "slurm-705.out").open("a") as out:
        out.write("[2026-11-20 08:57:00,000] step 2\n3: n11:3468:3905 [3] ib_plugin.c:1615 NCCL WARN NET/IB : Got "
                  "completion from peer 10.216.210.236<54862> with status=12 opcode=32616 len=0 vendor err 129 (Recv)\n")
    # Slurm's own line names only the batch host it printed on (slurmstepd's format string).
    with (logs / "slurm-703.out").open("a") as out:
        out.write("slurmstepd: error: *** JOB 703 ON n7 CANCELLED AT 2026-11-20T09:00:00 DUE TO NODE FAILURE, "
                  "SEE SLURMCTLD LOG FOR DETAILS ***\n")
    # n14 fell silent at 08:01; its peers' collectives hung, NCCL gave up on it at 08:11 and
    # the watchdogs fired at 08:12; srun noticed the lost node only at 08:14
    # (nebius/soperator#854's line).
    (logs / "n14.log").write_text(syslog("n14", ("07:50:00", ALIVE), ("08:01:00", ALIVE)))
    for node in ("n13", "n15"):
        (logs / f"{node}.log").write_text(syslog(node, ("07:50:00", ALIVE), ("08:30:00", ALIVE)))
    (logs / "slurm-706.out").write_text(
        f"0: [2026-11-20 08:10:00,000] {ITERATION}\n"
        + "".join(RETRY_EXCEEDED.format(r=r, node=node) + "\n" for r, node in ((3, "n13"), (19, "n15")))
        + "".join(watchdog_timeout(r, "08:12:00") + "\n" for r in (0, 1, 16, 17))
        + "srun: error: Node failure on n14\n"
    )
    # n17 died at 08:30 before Slurm noticed: its peers' NCCL connections gave up on its
    # address, the job failed, and n17 booted again at 08:52. n20 did the same but booted
    # only three hours later: an operator's reboot, the fabric's root stands.
    for first, silent, last, boot in (("n16", "n17", "n18", "08:52:00"), ("n19", "n20", "n21", "11:40:00")):
        (logs / f"{silent}.log").write_text(syslog(silent, ("07:50:00", ALIVE), ("08:29:00", ALIVE),
                                                   (boot, f"kernel: {BOOT}")))
        for node in (first, last):
            (logs / f"{node}.log").write_text(syslog(node, ("07:50:00", ALIVE), ("08:50:00", ALIVE)))
        address = f"10.22.0.{silent[1:]}"
        job = "707" if silent == "n17" else "708"
        (logs / f"slurm-{job}.out").write_text(
            "".join(bootstrap(8 * i, node, f"10.22.0.{node[1:]}") + "\n" for i, node in enumerate((first, silent, last)))
            + f"0: [2026-11-20 08:29:30,000] {ITERATION}\n"
            + "".join(retry_exceeded(r, node, address) + "\n" for r, node in ((3, first), (19, last)))
        )
    # slurmstepd's banner in the batch host's own syslog (n22, n24) names the host it ran
    # on, not the node that failed: n23 booted after job 709; nothing names job 710's.
    for batch, other, job in (("n22", "n23", "709"), ("n24", "n25", "710")):
        banner = (f"slurmstepd[5120]: error: *** JOB {job} ON {batch} CANCELLED AT 2026-11-20T09:00:00 "
                  "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
        (logs / f"{batch}.log").write_text(syslog(batch, ("07:50:00", ALIVE), ("09:00:00", banner)))
        last = ("09:20:00", f"kernel: {BOOT}") if other == "n23" else ("09:30:00", ALIVE)
        (logs / f"{other}.log").write_text(syslog(other, ("07:50:00", ALIVE), last))
    # Job 711 was requeued when n27 went DOWN: the survivor's banner came a second later.
    (logs / "slurm-711.out").write_text(
        f"[2026-11-20 08:10:00,000] {ITERATION}\n"
        "slurmstepd: error: *** JOB 711 ON n26 CANCELLED AT 2026-11-20T09:00:00 DUE TO JOB REQUEUE ***\n")
    # n29's log stops at 08:39; slurmctld found it not responding at 08:40 (nothing more of
    # it was landed) and job 712 ended NODE_FAIL. n31 stopped answering at 08:20 but was
    # back a minute later: job 713's lost node is another, unnamed.
    for node, quiet in (("n28", "08:44:00"), ("n29", "08:39:00"), ("n30", "08:44:00"), ("n31", "08:44:00")):
        (logs / f"{node}.log").write_text(syslog(node, ("07:50:00", ALIVE), (quiet, ALIVE)))
    # Landed the way its file names no host: `--node` the controller.
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), more=((ctld, {"node": "ctl01"}),))


def test_the_node_that_booted_after_a_node_fail_is_the_lost_node(verdicts):
    v = verdicts["700"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n2"])
    assert any(e["rule_id"] == "node_lost" and "booted again" in e["message"] for e in v["evidence"])
    # NODE_FAIL says a node went; nothing it printed says why: never definitive.
    assert v["quality"] == "probable"


def test_a_boot_hours_later_names_no_node(verdicts):
    assert (verdicts["701"]["cause"], verdicts["701"]["culprit_nodes"]) == ("host.node_failure", [])


def test_without_a_boot_the_state_alone_names_no_node(verdicts):
    assert (verdicts["702"]["cause"], verdicts["702"]["culprit_nodes"]) == ("host.node_failure", [])


def test_a_node_that_reported_a_cpu_stall_during_a_node_fail_is_the_lost_node(verdicts):
    v = verdicts["703"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n8"])
    assert "stalled CPU" in next(e["message"] for e in v["evidence"] if e["rule_id"] == "node_lost")
    roles = role_of(v, "node_lost"), role_of(v, "scheduler.slurm_cancelled_node_failure")
    assert roles == ("root_candidate", "confirmation")


def test_slurmstepds_banner_in_the_batch_hosts_syslog_does_not_name_the_batch_host(verdicts):
    v = verdicts["709"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n23"])
    assert role_of(v, "scheduler.slurm_cancelled_node_failure") == "confirmation"
    v = verdicts["710"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", [])


def test_a_stall_after_the_attempt_ended_names_no_node(verdicts):
    assert (verdicts["704"]["cause"], verdicts["704"]["culprit_nodes"]) == ("host.node_failure", [])


def test_the_controllers_report_names_the_node_it_set_down_not_the_controller(verdicts):
    v = verdicts["705"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n12"])
    down = [e for e in v["evidence"] if e["rule_id"] == "scheduler.slurmctld_node_not_responding"]
    assert [(e["node"], e["event"], e["role"]) for e in down] == [
        ("n12", "host.node_not_responding", "context"), ("n12", "host.node_failure", "root_candidate"),
    ]


def test_the_requeue_that_followed_a_lost_node_is_its_cascade_not_a_rival(verdicts):
    v = verdicts["711"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["alternatives"]) == ("host", "host.node_failure", ["n27"], [])
    # Neither node left a log of its own (incomplete coverage), as for job 705.
    assert v["quality"] == verdicts["705"]["quality"] == "probable"
    assert role_of(v, "scheduler.slurm_cancelled_due_to") == "cascade"


def test_the_survivors_that_confirm_a_lost_node_are_not_its_culprit_ranks(verdicts):
    v = verdicts["705"]
    assert [e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"] == ["confirmation"]
    assert v["culprit_ranks"] == []


def test_a_node_slurm_noticed_lost_after_the_hang_began_is_still_the_root(verdicts):
    """Slurm reports a silent node only after SlurmdTimeout: the report dates the notice,
    not the failure, so it is not a fault that came too late to have hung the job."""
    v = verdicts["706"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n14"])
    assert {e["role"] for e in v["evidence"] if e["rule_id"] == "fabric.nccl_ib_completion_error"} == {"confirmation"}


def test_the_silent_end_of_failing_connections_that_booted_soon_after_was_lost(verdicts):
    """A node that dies before Slurm notices leaves a FAILED attempt, its peers' NCCL errors
    naming its address, and a boot minutes after: it lost power or crashed."""
    v = verdicts["707"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n17"])
    assert role_of(v, "ib_common_peer") == "confirmation"


def test_a_silent_end_booted_hours_later_stays_the_fabrics(verdicts):
    v = verdicts["708"]
    assert (v["domain"], v["culprit_nodes"]) == ("network", ["n20"])


def test_the_node_slurmctld_found_not_responding_during_a_node_fail_is_the_lost_node(verdicts):
    """slurmctld names the node it lost before it sets it DOWN: ``not responding`` during a
    NODE_FAIL attempt names that node, unless it reported the node ``now responding`` again
    before the end."""
    v = verdicts["712"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.node_failure", ["n29"])
    v = verdicts["713"]
    assert (v["cause"], v["culprit_nodes"]) == ("host.node_failure", [])
