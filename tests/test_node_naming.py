"""Which roots name their node (``names_node``), end to end with real lines: a global OOM
kill names the node, also beside slurmstepd's count of it; a cgroup OOM kill (the job's own
memory limit) does not, nor does slurmstepd's count alone; a file server
that one node reports names that node (one node's kernel, whatever nodes the job's output
printed the error on), one that several nodes of the job report (as a root or
as context), or nodes of other jobs or of none, names none;
a quota names no node, nor does an OUT_OF_MEMORY state alone or a worker's SIGKILL
with no kernel report; a full /dev/shm names its node while it is the only one reporting it. Also: a contained ECC error (XID 94) before the attempt started is the
previous job's. Landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, CGROUP_OOM, CUDA_OOM, ITERATION, XID_79, syslog, verdicts_by_job

# https://github.com/equinor/ert/issues/7797 (a global OOM: the node ran out of memory)
GLOBAL_OOM = (
    "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/user.slice/user-21417.slice/user@21417.service,task=perl,pid=1440763,uid=21417",
    "Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, anon-rss:60356340kB, file-rss:0kB, "
    "shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0",
)
# https://github.com/chrisknewman/tusas/issues/149 (Slurm counts the step cgroup's OOM kills)
STEP_OOM = "error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks have been OOM Killed."
# https://github.com/kangear/tiny210v2-uboot/issues/5
NFS_DOWN = "nfs: server 192.168.1.229 not responding, still trying"
# https://github.com/tloen/alpaca-lora/issues/280
QUOTA = "OSError: [Errno 122] Disk quota exceeded"
# https://github.com/marbits-icm/marbits-public/issues/139 (a shared filesystem's client shut down)
ESHUTDOWN = "ls: cannot access data/shard-0007.tar: Cannot send after transport endpoint shutdown"
# https://github.com/ceph/ceph-csi/issues/4050
CEPH_MON_LOST = "libceph: mon2 (1)10.0.0.247:6789 session lost, hunting for new mon"
# https://github.com/aws/aws-parallelcluster/issues/2701
LUSTRE_LOST = ("Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection to no2zxbmv-MDT0000 (at 10.0.47.232@tcp) "
               "was lost; in progress operations using this service will wait for recovery to complete")
# The same client getting its target back, in the client's "Connection restored to <target>
# (at <nid>)" words (lustre/ptlrpc/import.c).
LUSTRE_RESTORED = "Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection restored to no2zxbmv-MDT0000 (at 10.0.47.232@tcp)"
# https://github.com/zai-org/ChatGLM2-6B/issues/520 (torchelastic's report of a worker SIGKILLed)
SIGKILLED = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 "
             "(pid: 31631) of binary: /usr/bin/python3")
# https://github.com/akash-network/support/issues/244
XID_94 = "NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"
# https://github.com/NVIDIA/nccl/issues/525 (NCCL could not create its /dev/shm segment)
SHM_FAILED = ("{node}:3468:3905 [{dev}] include/shm.h:48 NCCL WARN Error while creating shared memory segment "
              "nccl-shm-recv-1462445a6f01cbfc-1-2-3 (size 9637888)")

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
600|600|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n1|gres/gpu=8,node=1
601|601|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n2|gres/gpu=8,node=1
602|602|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[3-4]|gres/gpu=16,node=2
603|603|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n5|gres/gpu=8,node=1
604|604|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n6|gres/gpu=8,node=1
605|605|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n7|gres/gpu=8,node=1
606|606|train|alice|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n8|gres/gpu=8,node=1
607|607|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[9-10]|gres/gpu=16,node=2
608|608|train|bob|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n11|gres/gpu=8,node=1
609|609|train|carol|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n12|gres/gpu=8,node=1
610|610|train|dave|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|Orion-01-[01-02]|gres/gpu=16,node=2
611|611|train|erin|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n13|gres/gpu=8,node=1
612|612|train|frank|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n15|gres/gpu=8,node=1
613|613|train|frank|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n16|gres/gpu=8,node=1
614|614|train|gina|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[17-18]|gres/gpu=16,node=2
615|615|train|gina|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[19-20]|gres/gpu=16,node=2
616|616|train|hank|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[21-22]|gres/gpu=16,node=2
617|617|train|hank|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[23-24]|gres/gpu=16,node=2
618|618|train|ivan|OUT_OF_MEMORY|0:125|2026-11-20T10:00:00|2026-11-20T10:21:00|n[25-26]|gres/gpu=16,node=2
619|619|train|judy|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[27-29]|gres/gpu=24,node=3
620|620|train|karl|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[30-31]|gres/gpu=16,node=2
621|621|train|lena|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[32-34]|gres/gpu=24,node=3
"""


def _kernel(node: str, clock: str, *messages: str) -> str:
    return syslog(node, *((clock, f"kernel: {m}") for m in messages))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("naming")
    logs = root / "logs"
    logs.mkdir()
    # slurmstepd counts every OOM kill in the step's cgroup: the node's own (n1) and the
    # job's (n2, n8) alike.
    (logs / "n1.log").write_text(_kernel("n1", "10:20:00", *GLOBAL_OOM) + syslog("n1", ("10:20:00", f"slurmstepd[4242]: {STEP_OOM}")))
    (logs / "n2.log").write_text(_kernel("n2", "10:20:00", CGROUP_OOM) + syslog("n2", ("10:20:00", f"slurmstepd[4242]: {STEP_OOM}")))
    (logs / "n8.log").write_text(syslog("n8", ("10:20:00", f"slurmstepd[4242]: {STEP_OOM}")))
    (logs / "n3.log").write_text(_kernel("n3", "10:20:00", NFS_DOWN))
    (logs / "n4.log").write_text(_kernel("n4", "10:22:30", NFS_DOWN))  # noticed at its own pace
    # Another server than n3's and n4's (the same line for 192.168.1.230)
    (logs / "n5.log").write_text(_kernel("n5", "10:20:00", NFS_DOWN.replace("192.168.1.229", "192.168.1.230")))
    (logs / "n7.log").write_text(_kernel("n7", "09:50:00", XID_94))  # the job before's process
    # Both clients lost the CephFS session; only rank 0 (on n9) failed a file call with it.
    (logs / "n9.log").write_text(_kernel("n9", "10:19:00", CEPH_MON_LOST))
    (logs / "n10.log").write_text(_kernel("n10", "10:19:30", CEPH_MON_LOST))
    # One metadata target lost by the clients of two jobs four minutes apart: the server's.
    (logs / "n11.log").write_text(_kernel("n11", "10:20:00", LUSTRE_LOST))
    (logs / "n12.log").write_text(_kernel("n12", "10:24:00", LUSTRE_LOST))
    # n13's job lost a server that n14, running no job, lost a minute later.
    (logs / "n13.log").write_text(_kernel("n13", "10:20:00", NFS_DOWN.replace("192.168.1.229", "192.168.1.232")))
    (logs / "n14.log").write_text(_kernel("n14", "10:21:00", NFS_DOWN.replace("192.168.1.229", "192.168.1.232")))
    (logs / "slurm-607.out").write_text(f"0: [2026-11-20 10:29:00,000] {ESHUTDOWN}\n")
    # Slurm's NodeName is Orion-01-01; the node's syslog says orion-01-01 (hafs-community/HAFS#101
    # shows both spellings in one job's output).
    (logs / "orion-01-01.log").write_text(_kernel("orion-01-01", "10:20:00", NFS_DOWN.replace("192.168.1.229", "192.168.1.231")))
    (logs / "orion-01-02.log").write_text(syslog("orion-01-02", ("10:00:01", ALIVE)))
    for job in ("600", "601", "602", "603", "606", "610"):
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    (logs / "slurm-604.out").write_text(f"[2026-11-20 10:29:00,000] {QUOTA}\n")
    (logs / "slurm-605.out").write_text(f"[2026-11-20 10:29:00,000] {CUDA_OOM}\n")
    # 612 left no line anywhere; 613's node logged nothing of the kill.
    (logs / "n16.log").write_text(syslog("n16", ("10:00:01", ALIVE)))
    (logs / "slurm-613.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n[2026-11-20 10:29:00,000] {SIGKILLED}\n")
    # 614: a distributed checkpoint raised one client's ESHUTDOWN on the ranks of both nodes;
    # only n18's kernel lost its Lustre target. 615: the same output, neither kernel said a word.
    for job, nodes in (("614", ("n17", "n18")), ("615", ("n19", "n20"))):
        (logs / f"slurm-{job}.out").write_text("".join(f"{slot}: [2026-11-20 10:29:00,000] {ESHUTDOWN}\n"
                                                       for slot in (0, 8)))
        for node in nodes:
            (logs / f"{node}.log").write_text(syslog(node, ("10:00:01", ALIVE)))
    (logs / "n18.log").write_text(syslog("n18", ("10:00:01", ALIVE))
                                  + _kernel("n18", "10:28:30", LUSTRE_LOST.replace("MDT0000", "OST0006")))
    # 616: only n22's ranks could not create their NCCL /dev/shm segment (an earlier job's
    # segments filled it); n21 set up the same way without a word. 617: both nodes' ranks
    # failed alike (the job's container gave each 64 MB).
    for job, failing in (("616", ("n22",)), ("617", ("n23", "n24"))):
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:00:30,000] {ITERATION}\n" + "".join(
            f"{8 * (int(node[1:]) % 2)}: {SHM_FAILED.format(node=node, dev=0)}\n" for node in failing))
    for node in ("n21", "n22", "n23", "n24"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:00:01", ALIVE)))
    # 618: the job's own cgroup OOM kill on n25 at 10:20:00, and a GPU of n26 off the bus a
    # second later: two explanations, and n26 a suspect though the OOM kill names no node.
    (logs / "n25.log").write_text(_kernel("n25", "10:20:00", CGROUP_OOM))
    (logs / "n26.log").write_text(_kernel("n26", "10:20:01", XID_79))
    (logs / "slurm-618.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    # 619: n27's and n28's NFS server stopped answering at 10:20:00, and a GPU of n29 fell
    # off the bus two seconds later: two explanations, but the clients of the server are
    # no suspects of their own.
    for node in ("n27", "n28"):
        (logs / f"{node}.log").write_text(_kernel(node, "10:20:00", NFS_DOWN.replace("192.168.1.229", "192.168.1.233")))
    (logs / "n29.log").write_text(_kernel("n29", "10:20:02", XID_79))
    (logs / "slurm-619.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    # 621: the other way round: a GPU of n34 fell off the bus at 10:20:00, and a second later
    # all three nodes' NFS server stopped answering.
    (logs / "n34.log").write_text(_kernel("n34", "10:20:00", XID_79)
                                  + _kernel("n34", "10:20:01", NFS_DOWN.replace("192.168.1.229", "192.168.1.234")))
    for node in ("n32", "n33"):
        (logs / f"{node}.log").write_text(_kernel(node, "10:20:01", NFS_DOWN.replace("192.168.1.229", "192.168.1.234")))
    (logs / "slurm-621.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    # 620: both clients lost one target at 10:05 and got it back 40 s later; at 10:20 n31
    # alone lost another target, and the job failed of it.
    def target(line: str, name: str) -> str:
        return line.replace("MDT0000", name)

    for node in ("n30", "n31"):
        lines = [("10:05:00", target(LUSTRE_LOST, "OST0002")), ("10:05:40", target(LUSTRE_RESTORED, "OST0002"))]
        if node == "n31":
            lines.append(("10:20:00", target(LUSTRE_LOST, "OST0009")))
        (logs / f"{node}.log").write_text(syslog(node, *((clock, f"kernel: {m}") for clock, m in lines)))
    (logs / "slurm-620.out").write_text(f"[2026-11-20 10:10:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_global_oom_kill_names_its_node(verdicts):
    assert (verdicts["600"]["cause"], verdicts["600"]["culprit_nodes"]) == ("host.oom_killer", ["n1"])


def test_a_cgroup_oom_kill_names_no_node(verdicts):
    assert (verdicts["601"]["cause"], verdicts["601"]["culprit_nodes"]) == ("host.oom_killer", [])


@pytest.mark.parametrize("job", ["600", "601"])
def test_an_oom_kill_the_job_must_fix_is_the_workloads_responsibility(verdicts, job):
    # The domain says where it happened (host memory); the rule's action says whose fix it is.
    v = verdicts[job]
    assert (v["domain"], v["recommended_action"], v["responsibility"]) == ("host", "fix_workload", "workload")


def test_an_oom_state_alone_names_no_node(verdicts):
    # Slurm's OUT_OF_MEMORY is the job's cgroup reaching its limit: not the node's fault.
    v = verdicts["612"]
    assert (v["cause"], v["culprit_nodes"]) == ("host.oom_killer", [])


def test_a_worker_killed_by_sigkill_names_no_node(verdicts):
    # The signal alone cannot tell the node's memory from the job's own limit.
    v = verdicts["613"]
    assert (v["cause"], v["culprit_nodes"]) == ("host.oom_killer", [])


def test_a_file_server_outage_stays_the_infrastructures(verdicts):
    v = verdicts["602"]
    assert (v["domain"], v["responsibility"]) == ("storage", "infrastructure")


def test_slurms_count_of_oom_kills_names_no_node_of_its_own(verdicts):
    assert (verdicts["606"]["cause"], verdicts["606"]["culprit_nodes"]) == ("host.oom_killer", [])


def test_a_file_server_several_nodes_report_names_none(verdicts):
    assert (verdicts["602"]["cause"], verdicts["602"]["culprit_nodes"]) == ("storage.filesystem_unavailable", [])


def test_a_file_server_one_node_reports_names_it(verdicts):
    assert (verdicts["603"]["cause"], verdicts["603"]["culprit_nodes"]) == ("storage.filesystem_unavailable", ["n5"])


def test_a_file_server_other_nodes_report_as_context_names_none(verdicts):
    """One node's failed call is the root; the other node's lost session (context, the same
    cause) still shows the service went away for both."""
    assert (verdicts["607"]["cause"], verdicts["607"]["culprit_nodes"]) == ("storage.filesystem_unavailable", [])


def test_a_file_server_one_nodes_kernel_lost_names_it_whatever_the_output_says(verdicts):
    """The job's output may print one client's error on every node; the kernels say which
    client lost the service. With no kernel report, the output's nodes are all there is."""
    assert (verdicts["614"]["cause"], verdicts["614"]["culprit_nodes"]) == ("storage.filesystem_unavailable", ["n18"])
    assert (verdicts["615"]["cause"], verdicts["615"]["culprit_nodes"]) == ("storage.filesystem_unavailable", [])


def test_a_quota_names_no_node(verdicts):
    assert (verdicts["604"]["cause"], verdicts["604"]["culprit_nodes"]) == ("storage.quota_exceeded", [])


def test_a_contained_ecc_error_before_the_start_is_the_previous_jobs(verdicts):
    assert verdicts["605"]["cause"] == "workload.cuda_oom"


def test_a_storage_target_the_clients_of_other_jobs_lost_too_names_no_node(verdicts):
    """Each job saw the target go from one node only; the run's other job saw the same
    target go from another node minutes later: the server failed, not a client."""
    for job in ("608", "609"):
        assert (verdicts[job]["cause"], verdicts[job]["culprit_nodes"]) == ("storage.filesystem_unavailable", [])


def test_a_target_one_node_lost_names_it_though_all_clients_lost_another_before(verdicts):
    """The two clients losing another target fifteen minutes before say nothing of this one."""
    assert (verdicts["620"]["cause"], verdicts["620"]["culprit_nodes"]) == ("storage.filesystem_unavailable", ["n31"])


def test_a_file_server_an_idle_node_lost_too_names_no_node(verdicts):
    """The node that ran no job is a client of the server all the same."""
    assert (verdicts["611"]["cause"], verdicts["611"]["culprit_nodes"]) == ("storage.filesystem_unavailable", [])


def test_node_names_match_whatever_their_case(verdicts):
    v = verdicts["610"]
    assert (v["cause"], v["culprit_nodes"]) == ("storage.filesystem_unavailable", ["orion-01-01"])
    assert v["quality"] == verdicts["603"]["quality"]
    assert all(c["error"] is None for c in v["coverage"])


def test_a_full_dev_shm_names_its_node_while_it_is_the_only_one(verdicts):
    """One node's NCCL could not create its /dev/shm segment while the others, set up alike,
    could: that node's /dev/shm. Every node failing alike is the job's set-up: no node."""
    v = verdicts["616"]
    assert (v["cause"], v["culprit_nodes"]) == ("host.shm_exhausted", ["n22"])
    v = verdicts["617"]
    assert (v["cause"], v["culprit_nodes"]) == ("host.shm_exhausted", [])


def test_a_rival_beside_a_root_that_names_no_node_still_names_its_own(verdicts):
    v = verdicts["618"]
    assert v["quality"] == "ambiguous"
    assert v["culprit_nodes"] == ["n26"]


def test_a_shared_servers_outage_beside_a_root_names_none_of_its_clients(verdicts):
    """The file server every node lost is a rival on none of them: the clients are no
    suspects beside another root either."""
    v = verdicts["621"]
    assert v["quality"] == "ambiguous"
    assert v["culprit_nodes"] == ["n34"]


def test_a_rival_beside_a_shared_servers_outage_names_its_own_node_not_the_clients(verdicts):
    v = verdicts["619"]
    assert v["quality"] == "ambiguous"
    assert v["culprit_nodes"] == ["n29"]
