"""On a node shared between jobs, a neighbour's process faulting its own GPU (an XID 31
naming a pid torchrun did not start on that node) is no root of this attempt, which died of
its own CUDA OOM; the same XID in a process torchrun named is the job's own fault. Real
lines, landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, role_of, syslog, verdicts_by_job

# The MMU fault of a process on its GPU, in the driver's words (the pack's gpu_xid test line,
# https://github.com/akash-network/support/issues/244).
XID_31 = ("kernel: NVRM: Xid (PCI:0000:1b:00): 31, pid={pid}, name=python, Ch 00000008, intr 00000000. MMU Fault: "
          "ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE")
# torchrun's report of its worker's failure (torch/distributed/elastic/multiprocessing/api.py).
FAILED = ("0: E1120 10:20:21.000000 140213371852608 torch/distributed/elastic/multiprocessing/api.py:869] failed "
          "(exitcode: 1) local_rank: 0 (pid: {pid}) of binary: /usr/bin/python3")

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
890|890|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|s1|gres/gpu=1,node=1
891|891|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|s2|gres/gpu=1,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("other_process")
    logs = root / "logs"
    logs.mkdir()
    # 890: s1's other GPU faulted in a neighbour's process at 10:19:58; this job's rank ran out
    # of memory (its traceback unstamped below the step at 08:31) and torchrun reported it.
    # 891: the same, but the faulting process is the one torchrun started.
    for job, node, xid_pid in (("890", "s1", 1733201), ("891", "s2", 1733022)):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", "kernel: ok"), ("10:19:58", XID_31.format(pid=xid_pid))))
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 08:31:10,000] {ITERATION}\n0: {CUDA_OOM}\n" + FAILED.format(pid=1733022) + "\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_neighbours_xid_on_a_shared_node_is_context(verdicts):
    v = verdicts["890"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.cuda_oom")
    assert role_of(v, "gpu_xid") == "context"


def test_the_jobs_own_processs_xid_stays_a_root(verdicts):
    assert role_of(verdicts["891"], "gpu_xid") != "context"
