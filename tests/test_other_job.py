"""The ``other_job_events`` python rule, end to end: on a node two jobs share, the OOM
killer's kill of the other job's process (its memory cgroup names that job) is not this
attempt's root, nor is the victim line of the same kill, nor the kill of a system service's
process (its unit's cgroup); the kill of this job's own process still is. Lines in the kernel's formats, landed through the Slurm connector and
the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
600|600|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n1|gres/gpu=4,node=1
601|601|prep|bob|OUT_OF_MEMORY|0:125|2026-11-20T10:05:00|2026-11-20T10:20:05|n1|gres/gpu=4,node=1
602|602|train|carol|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:50:00|n2|gres/gpu=8,node=1
"""


def _kill(job: str, pid: int) -> list[tuple[str, str]]:
    """A global OOM kill of ``pid`` of Slurm job ``job`` (its cgroup/v1 memory cgroup), as
    the kernel prints it: the summary (mm/oom_kill.c) and the victim line."""
    return [
        ("10:20:00", "kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,"
                     f"task_memcg=/slurm/uid_1187/job_{job}/step_0/task_0,task=python3,pid={pid},uid=1187"),
        ("10:20:00", f"kernel: Out of memory: Killed process {pid} (python3) total-vm:1491288804kB, "
                     "anon-rss:1442331904kB, file-rss:71232kB, shmem-rss:0kB, UID:1187 pgtables:2906544kB oom_score_adj:0"),
    ]


SERVICE_KILL = [
    # The kernel's summary (mm/oom_kill.c) for a service that reached its unit's MemoryMax=,
    # the victim line and the reaper's of the same kill.
    ("10:10:00", "kernel: oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
                 "oom_memcg=/system.slice/fluent-bit.service,task_memcg=/system.slice/fluent-bit.service,"
                 "task=fluent-bit,pid=3120,uid=0"),
    ("10:10:00", "kernel: Memory cgroup out of memory: Killed process 3120 (fluent-bit) total-vm:1130073kB, "
                 "anon-rss:524288kB, file-rss:385302kB, shmem-rss:7443kB, UID:0 pgtables:415702kB oom_score_adj:0"),
    ("10:10:00", "kernel: oom_reaper: reaped process 3120 (fluent-bit), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"),
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("other_job")
    logs = root / "logs"
    logs.mkdir()
    (logs / "n1.log").write_text(syslog("n1", *_kill("601", 2204511)))
    (logs / "slurm-600.out").write_text(f"[2026-11-20 10:21:30,000] {CUDA_OOM}\n")
    (logs / "slurm-601.out").write_text("[2026-11-20 10:06:00,000] tokenizing shard 17/512\n")
    (logs / "n2.log").write_text(syslog("n2", *SERVICE_KILL))
    (logs / "slurm-602.out").write_text(f"[2026-11-20 10:44:00,000] {CUDA_OOM}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_another_jobs_oom_kill_is_not_this_attempts_root(verdicts):
    v = verdicts["600"]
    assert v["cause"] == "workload.cuda_oom" and v["quality"] != "ambiguous"
    roles = {e["rule_id"]: e["role"] for e in v["evidence"] if e["rule_id"].startswith("host.oom")}
    assert roles == {"host.oom_kill_summary": "context", "host.oom_killed_process": "context"}


def test_the_kill_of_the_jobs_own_process_is_its_root(verdicts):
    assert (verdicts["601"]["domain"], verdicts["601"]["cause"]) == ("host", "host.oom_killer")


def test_a_system_services_oom_kill_is_not_this_attempts_root(verdicts):
    """A log shipper killed at its own memory limit mid-job: the job ran on and died of its
    own error 34 minutes later."""
    v = verdicts["602"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    roles = {e["rule_id"]: e["role"] for e in v["evidence"] if e["rule_id"].startswith("host.oom")}
    assert roles == {"host.oom_kill_summary": "context", "host.oom_killed_process": "context",
                     "host.oom_reaper": "context"}
