"""A GSP timeout the driver reports in a monitoring query (XID 119, ``name=nvidia-smi``) on a
node whose ranks printed no GPU fault is no rival to another node's root; alone, or where
the job's own processes on its node saw the GPU fail, it stays a root candidate
(``rules/xid_roles.py``). Landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import XID_79, role_of, syslog, verdicts_by_job, watchdog_timeout

# NVIDIA/open-gpu-kernel-modules#446: nvidia-smi's call into a GPU whose GSP stopped answering.
GSP_QUERY = ("kernel: NVRM: Xid (PCI:0000:61:00): 119, pid=1346198, name=nvidia-smi, Timeout waiting for RPC from GSP! "
             "Expected function 103 (GSP_RM_ALLOC) (0x80 0x38).")
# liunian-Jay/MU-GOT#7: the job's own CUDA call failing on that GPU (behind srun --label).
CUDA_UNKNOWN = "1: [rank1]: RuntimeError: CUDA error: unknown error"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|m[1-2]|gres/gpu=2,node=2
901|901|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|m[3-4]|gres/gpu=2,node=2
902|902|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|m[5-6]|gres/gpu=2,node=2
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitor_query")
    logs = root / "logs"
    logs.mkdir()
    # 900: a GPU of m1 fell off the bus at 10:20:00; a second later nvidia-smi's query on m2
    # timed out; m2's rank went on to time out in the collective, its GPU error-free.
    # 901: only the query's timeout, on m4, whose rank never reported (it hung there).
    # 902: 900 again, but m6's rank printed a CUDA error: the job's own process saw it too.
    for job, (lost, queried), lines in (("900", ("m1", "m2"), [watchdog_timeout(1, "10:30:00")]),
                                        ("902", ("m5", "m6"), [CUDA_UNKNOWN])):
        (logs / f"{lost}.log").write_text(syslog(lost, ("10:10:00", "kernel: ok"), ("10:20:00", f"kernel: {XID_79}")))
        (logs / f"{queried}.log").write_text(syslog(queried, ("10:10:00", "kernel: ok"), ("10:20:01", GSP_QUERY)))
        (logs / f"slurm-{job}.out").write_text("".join(f"{line}\n" for line in lines))
    (logs / "m3.log").write_text(syslog("m3", ("10:10:00", "kernel: ok")))
    (logs / "m4.log").write_text(syslog("m4", ("10:10:00", "kernel: ok"), ("10:20:01", GSP_QUERY)))
    (logs / "slurm-901.out").write_text(watchdog_timeout(0, "10:30:00") + "\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_monitoring_querys_gsp_timeout_is_no_rival_to_another_nodes_root(verdicts):
    v = verdicts["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["m1"])
    assert v["quality"] != "ambiguous"
    assert [e["role"] for e in v["evidence"] if e["event"] == "xid_119_gsp_rpc_timeout"] == ["context"]


def test_a_monitoring_querys_gsp_timeout_alone_is_the_root(verdicts):
    v = verdicts["901"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.gsp_timeout", ["m4"])


def test_a_gsp_timeout_on_a_node_whose_ranks_saw_a_gpu_fault_stays(verdicts):
    v = verdicts["902"]
    assert role_of(v, "gpu_xid") == "root_candidate"
    assert v["culprit_nodes"] == ["m5", "m6"]
