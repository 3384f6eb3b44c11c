"""A heterogeneous job end to end: its components (sacct's ``900+0`` on h01, ``900+1`` on h02
and h03) write one output, ``slurm-900.out``; a GPU of h02 falls off the bus and every rank
of both components times out. The component that ran h02 reads the XID; the other, which
saw only the timeouts, takes its sibling's root (``het_sibling``), never as a definitive
verdict, and the two count as one job for the fleet's repeat-offender note. Real lines,
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, XID_79, syslog, verdicts_by_job, watchdog_timeout

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900+0|900|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|h01|gres/gpu=8,node=1
900+1|901|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|h[02-03]|gres/gpu=16,node=2
910+0|910|etl|alice|OUT_OF_MEMORY|0:125|2026-11-20T08:00:00|2026-11-20T09:00:00|h04|cpu=32,mem=64G,node=1
910+1|911|etl|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T09:00:00|h05|gres/gpu=8,node=1
"""


def timeout_on(node: str, rank: int) -> str:
    """PyTorch's watchdog timeout of ``rank`` (:func:`tests.end_to_end.watchdog_timeout`)
    behind NCCL's host prefix instead of a task id, ten minutes after the GPU fell off the bus."""
    return f"{node}:4551{rank}:4559{rank} [{rank % 8}] " + watchdog_timeout(rank, "08:59:00").split(": ", 1)[1]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("het")
    logs = root / "logs"
    logs.mkdir()
    (logs / "slurm-900.out").write_text(
        f"[2026-11-20 08:40:00,000] {ITERATION}\n" + "".join(
            timeout_on(node, rank) + "\n" for node, rank in (("h01", 0), ("h01", 1), ("h03", 16), ("h03", 17))))
    (logs / "h02.log").write_text(syslog("h02", ("08:49:00", f"kernel: {XID_79}")))
    # 910: the data-loading component on h04 outgrew its own memory limit (slurmstepd's
    # count of the kill and srun's task report, as Slurm prints them, and the kernel's
    # cgroup kill, as rules/host.yaml's hit line has it); the GPU component on h05 then
    # timed out waiting for it.
    (logs / "slurm-910.out").write_text(
        f"[2026-11-20 08:40:00,000] {ITERATION}\n"
        "slurmstepd: error: Detected 1 oom_kill event in StepId=910+0.0. Some of the step tasks have been OOM Killed.\n"
        "srun: error: h04: task 0: Out Of Memory\n" + timeout_on("h05", 0).replace("4551", "4661") + "\n")
    (logs / "h04.log").write_text(syslog("h04", ("08:49:00", "kernel: Memory cgroup out of memory: Killed process 629 "
                                                 "(python3) total-vm:14119556kB, anon-rss:6538204kB, file-rss:80652kB, "
                                                 "shmem-rss:16kB, UID:0 pgtables:13432kB oom_score_adj:0")))
    (logs / "h05.log").write_text(syslog("h05", ("08:30:00", "kernel: ok")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_component_that_ran_the_failed_gpu_reads_it(verdicts):
    v = verdicts["900+1"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["h02"])
    assert {e["node"] for e in v["evidence"] if e["rule_id"] == "comm.nccl_watchdog_timeout"} == {"h03"}


def test_a_component_that_saw_only_timeouts_takes_its_siblings_root(verdicts):
    v = verdicts["900+0"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["h02"])
    assert v["quality"] == "probable"
    root = next(e for e in v["evidence"] if e["rule_id"] == "het_sibling")
    assert (root["node"], root["role"]) == ("h02", "root_candidate")
    assert root["message"].startswith("the job's component 900+1 failed first: NVRM: Xid")
    assert {e["node"] for e in v["evidence"] if e["rule_id"] == "comm.nccl_watchdog_timeout"} == {"h01"}


def test_a_siblings_root_that_names_no_node_names_none_in_the_copy(verdicts):
    """A memory cgroup's kill is the job's own limit: neither component names its node."""
    for job in ("910+0", "910+1"):
        v = verdicts[job]
        assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.oom_killer", []), job
    assert any(e["rule_id"] == "het_sibling" for e in verdicts["910+1"]["evidence"])


def test_the_components_are_one_job_for_the_repeat_offender_note(verdicts):
    assert not [e for v in verdicts.values() for e in v["evidence"] if e["rule_id"] == "fleet.repeat_offender"]
