"""A precedence rule's ``ahead``: how long after the line it would outrank the preferred one
may come. A GPU's XID stamped half a minute after the process it would explain had already
raised its exception (and the step was cancelled) is a fault of its own, not that error's
cause, while a CUDA out-of-memory error may be a failing GPU's first word, the XID coming
later; an NVLink error its node's kernel logged seconds before a GPU of the
node fell off the bus is no echo of the fall-off: it is the root, on its own GPU. Real lines,
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import CUDA_OOM, ITERATION, role_of, syslog, verdicts_by_job
from tests.test_earlier_job import XID_48
from tests.test_nvlink_domain import XID_74

# DDP's reducer check (torch/csrc/distributed/c10d/reducer.cpp): the program's own exception
DDP_ERROR = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
             "This error indicates that your module has parameters that were not used in producing loss.")
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 (a GPU fallen off the bus)
XID_79 = "NVRM: Xid (PCI:0000:5d:00): 79, GPU has fallen off the bus."

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
850|850|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|p1|gres/gpu=8,node=1
851|851|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|p2|gres/gpu=8,node=1
852|852|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|p3|gres/gpu=8,node=1
853|853|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:00|p4|gres/gpu=8,node=1
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("ahead")
    logs = root / "logs"
    logs.mkdir()
    # 850: a rank raised DDP's reducer error at 10:20:02, the step was cancelled at 10:20:03,
    # and the kernel reported a double-bit ECC error at 10:20:30. 851: the same error
    # reported at 10:20:01, a second before a CUDA OOM: the broken GPU surfacing as an OOM.
    # 853: the OOM first, the ECC error 28 s later: a failing GPU's first word, still.
    for job, node, clock, error in (("850", "p1", "10:20:30", DDP_ERROR), ("851", "p2", "10:20:01", CUDA_OOM),
                                    ("853", "p4", "10:20:30", CUDA_OOM)):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", "kernel: ok"), (clock, f"kernel: {XID_48}")))
        (logs / f"slurm-{job}.out").write_text(
            f"[2026-11-20 10:19:00,000] {ITERATION}\n[2026-11-20 10:20:02,000] {error}\n"
            f"slurmstepd: error: *** STEP {job}.0 ON {node} CANCELLED AT 2026-11-20T10:20:03 DUE TO TASK FAILURE ***\n")
    # 852: one GPU's NVLink failed at 10:20:00 and another GPU of the node fell off the bus
    # at 10:20:04.
    (logs / "p3.log").write_text(syslog("p3", ("10:05:00", "kernel: ok"), ("10:20:00", XID_74),
                                        ("10:20:04", f"kernel: {XID_79}")))
    (logs / "slurm-852.out").write_text(f"[2026-11-20 10:19:00,000] {ITERATION}\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_an_xid_after_the_process_raised_its_exception_is_not_its_cause(verdicts):
    v = verdicts["850"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.exception")
    assert role_of(v, "framework.python_exception") == "root_candidate"


def test_a_cuda_oom_before_or_after_the_gpus_xid_is_the_gpus(verdicts):
    for job, node in (("851", "p2"), ("853", "p4")):
        v = verdicts[job]
        assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu_memory", "gpu_memory.uncorrectable_ecc", [node])


def test_an_nvlink_error_before_a_fall_off_is_no_echo_of_it(verdicts):
    v = verdicts["852"]
    assert (v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == ("nvlink.link_error", ["p3"], ["0000:ba:00"])
