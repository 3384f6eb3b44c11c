"""A rank that died of a program error failed for its own reason: a GPU fault on its node
that no CUDA error of the job confirms (a neighbour's GPU on a shared node), or a port that
went down with no NCCL error of the job, is context (``rules/program_error.py``); a GPU
fault the job did see stays the root. Landed through
the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from ingest.connectors.topology import TopologyConnector, TopologyOptions
from tests.end_to_end import ITERATION, XID_79, role_of, syslog, verdicts_by_job

# https://github.com/gauthierdmn/question_generation/issues/4
VALUE_ERROR = "ValueError: Expected input batch_size (1216) to match target batch_size (1280)"
# https://github.com/jiwei0921/DMRA/issues/5
SHAPE_ERROR = "RuntimeError: The size of tensor a (150) must match the size of tensor b (152) at non-singleton dimension 3"
# PyTorch's other shape errors: https://github.com/QwenLM/Qwen-VL/issues/231 (torch.stack of
# uneven samples), https://github.com/lyuwenyu/RT-DETR/issues/189 (torch.cat),
# https://github.com/InternLM/xtuner/issues/142 (view), https://github.com/cvachha/instruct-gs2gs/issues/25 (conv)
SHAPE_ERRORS = {
    "815": "RuntimeError: stack expects each tensor to be equal size, but got [2] at entry 0 and [1] at entry 2",
    "816": "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 108 but got size 107 for tensor number 1 in the list.",
    "817": "RuntimeError: shape '[-1, 32000]' is invalid for input of size 128376192",
    "818": "RuntimeError: Given groups=1, weight of size [320, 4, 3, 3], expected input[3, 8, 92, 124] to have 4 channels, but got 8 channels instead",
}
# https://github.com/guoyww/AnimateDiff/issues/306
KEY_ERROR = "KeyError: 'RANK'"
# https://github.com/kangear/tiny210v2-uboot/issues/5
NFS_DOWN = "kernel: nfs: server 192.168.1.229 not responding, still trying"
# https://github.com/ntop/PF_RING/issues/293 (an Ethernet port the job's traffic never used)
NIC_DOWN = "kernel: ixgbe 0000:08:00.0 eth11: NIC Link is Down"
# https://github.com/leptonai/gpud/pull/1209 (an IB port's flap, down then back up)
IB_FLAP = ("kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN",
           "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE")
# https://github.com/huggingface/accelerate/issues/2960 (srun's report of the task that failed)
SRUN_EXIT = "srun: error: g10: task 0: Exited with exit code 1"
# https://github.com/PaddlePaddle/Paddle/issues/57411 (a CUDA failure raised as OSError)
CUDA_OS_ERROR = "OSError: (External) CUDA error(719), unspecified launch failure."
# https://github.com/AkariAsai/self-rag/issues/91 (an embedding fed an index out of range:
# the kernel's assertion, once per thread, then the error it raises)
KERNEL_ASSERT = ("../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [654,0,0], "
                 "thread: [{}] Assertion `srcIndex < srcSelectDimSize` failed.\n")
DEVICE_ASSERT = "RuntimeError: CUDA error: device-side assert triggered"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
810|810|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g1|gres/gpu=1,node=1
811|811|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g2|gres/gpu=1,node=1
812|812|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g3|gres/gpu=1,node=1
813|813|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g4|gres/gpu=1,node=1
814|814|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g5|gres/gpu=1,node=1
815|815|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g6|gres/gpu=1,node=1
816|816|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g7|gres/gpu=1,node=1
817|817|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g8|gres/gpu=1,node=1
818|818|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g9|gres/gpu=1,node=1
819|819|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g10|gres/gpu=1,node=1
820|820|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g11|gres/gpu=1,node=1
821|821|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[20-21]|gres/gpu=16,node=2
822|822|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[22-23]|gres/gpu=4,node=2
823|823|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g24|gres/gpu=8,node=1
824|824|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g25|gres/gpu=4,node=1
825|825|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g26|gres/gpu=4,node=1
826|826|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[27-28]|gres/gpu=16,node=2
827|827|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[29-30]|gres/gpu=16,node=2
"""

ERRORS = {
    "810": [VALUE_ERROR],
    "811": [SHAPE_ERROR],
    "812": [CUDA_OS_ERROR],
    "813": [CUDA_OS_ERROR, KEY_ERROR],
    "814": [KEY_ERROR],
    **{job: [error] for job, error in SHAPE_ERRORS.items()},
    "819": [SHAPE_ERRORS["815"]],
    "820": [DEVICE_ASSERT],
}
FAULTS = {"814": [NIC_DOWN], "819": IB_FLAP}
"""The node lines of each job (default: an XID 79), a second apart."""
AFTER = {"819": f"{SRUN_EXIT}\n"}
"""What each job's output says after the traceback (srun's report: the job's first cascade)."""
BEFORE = {"820": "".join(KERNEL_ASSERT.format(f"{thread},0,0") for thread in range(32, 40))}
"""What each job's output says before the traceback."""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("program_error")
    logs = root / "logs"
    logs.mkdir()
    for index, (job, errors) in enumerate(ERRORS.items(), start=1):
        lines = FAULTS.get(job, [f"kernel: {XID_79}"])
        (logs / f"g{index}.log").write_text(syslog(f"g{index}", *((f"10:20:0{i}", line) for i, line in enumerate(lines))))
        traceback = "".join(
            f'Traceback (most recent call last):\n  File "train.py", line 171, in <module>\n{error}\n' for error in errors
        )
        (logs / f"slurm-{job}.out").write_text(
            f"[2026-11-20 10:20:20,000] {ITERATION}\n{BEFORE.get(job, '')}{traceback}{AFTER.get(job, '')}")
    # 821: a rank on g20 raised a KeyError at 10:20:03 and a GPU of g21 fell off the bus a
    # second later; the job held both nodes whole (8 GPUs each). 822: the same on nodes it
    # shared with other jobs (2 GPUs each): the XID may be a neighbour's GPU.
    for job, first, second in (("821", "g20", "g21"), ("822", "g22", "g23")):
        (logs / f"{first}.log").write_text(syslog(first, ("10:10:00", "kernel: ok")))
        (logs / f"{second}.log").write_text(syslog(second, ("10:10:00", "kernel: ok"), ("10:20:04", f"kernel: {XID_79}")))
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 10:19:20,000] {ITERATION}\n0: [2026-11-20 10:20:03,000] Traceback (most recent call last):\n"
            f'0:   File "train.py", line 171, in <module>\n0: {KEY_ERROR}\n')
    # 823: one node held whole; the rank's KeyError is unstamped (printed any time after
    # 10:19:20) and a GPU of the same node fell off the bus at 10:20:04.
    # 826: a rank on g27 raised a KeyError at 10:20:03; g28's NFS client had lost its server
    # at 10:19:40, and no rank of g28 reported an error. 827: the server was lost by g29,
    # the KeyError's own node (a file system gone makes imports fail there).
    for job, (first, second), lost in (("826", ("g27", "g28"), "g28"), ("827", ("g29", "g30"), "g29")):
        for node in (first, second):
            lines = [("10:10:00", "kernel: ok"), *([("10:19:40", NFS_DOWN)] if node == lost else [])]
            (logs / f"{node}.log").write_text(syslog(node, *lines))
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 10:19:20,000] {ITERATION}\n0: [2026-11-20 10:20:03,000] Traceback (most recent call last):\n"
            f'0:   File "train.py", line 171, in <module>\n0: {KEY_ERROR}\n')
    # 824: the same on a GB200 compute tray the topology lists with 4 GPUs, all 4 the job's;
    # 825: 4 GPUs of a node the topology lists with 8.
    for job, node in (("823", "g24"), ("824", "g25"), ("825", "g26")):
        (logs / f"{node}.log").write_text(syslog(node, ("10:10:00", "kernel: ok"), ("10:20:04", f"kernel: {XID_79}")))
        (logs / f"slurm-{job}.out").write_text(
            f"0: [2026-11-20 10:19:20,000] {ITERATION}\n0: Traceback (most recent call last):\n"
            f'0:   File "train.py", line 171, in <module>\n0: {KEY_ERROR}\n')
    gpus = root / "gpus.csv"
    gpus.write_text("node,gpu,pci\n" + "".join(f"g25,{i},0000:{0x18 + i:02x}:00.0\n" for i in range(4))
                    + "".join(f"g26,{i},0000:{0x18 + i:02x}:00.0\n" for i in range(8)))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20),
                           connectors=(TopologyConnector(TopologyOptions(gpus_file=gpus), "c1"),))


# 815-818: PyTorch's other shape errors are program errors too.
@pytest.mark.parametrize("job", ["810", "811", *sorted(SHAPE_ERRORS)])
def test_a_program_error_outranks_a_gpu_fault_the_job_never_saw(verdicts, job):
    v = verdicts[job]
    assert (v["domain"], v["cause"]) == ("workload", "workload.exception")
    assert role_of(v, "gpu_xid") == "context"


@pytest.mark.parametrize(("job", "rule"), [
    ("814", "fabric.ethernet_nic_link_state"),  # a port the job never used
    # The port came back 19 s before the error and srun's report of the failed task: recent
    # enough to count as felt by the job, but a stack of uneven samples is the data's fault,
    # whatever the port did.
    ("819", "fabric.mlx5_link_state"),
])
def test_a_program_error_outranks_a_port_no_error_of_the_job_confirms(verdicts, job, rule):
    v = verdicts[job]
    assert (v["domain"], v["cause"]) == ("workload", "workload.exception")
    assert role_of(v, rule) == "context"


def test_a_device_side_assert_outranks_a_gpu_fault_the_job_never_saw(verdicts):
    """An index out of range trips a kernel's assertion: the program's data, whatever the
    neighbour's GPU did (the precedence had made the assert the XID's confirmation)."""
    v = verdicts["820"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.device_assert", [])
    assert role_of(v, "gpu_xid") == "context"
    assert role_of(v, "cuda.kernel_assert") == "root_candidate"


def test_a_cuda_error_of_the_job_confirms_the_gpu_fault(verdicts):
    v = verdicts["812"]
    assert (v["domain"], v["cause"]) == ("gpu", "gpu.fallen_off_bus")
    assert role_of(v, "framework.python_exception") == "confirmation"


def test_a_gpu_fault_the_job_saw_stays_the_root_beside_a_program_error(verdicts):
    v = verdicts["813"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["g4"])


def test_the_jobs_own_gpu_failing_at_the_moment_of_a_program_error_competes_with_it(verdicts):
    """On nodes the job held whole, a GPU that fell off the bus a second after a rank's
    KeyError is the job's own, not a neighbour's: two explanations, neither outranks the
    other. On shared nodes it may be a neighbour's, and the program error stands. The
    KeyError's node is no suspect: no GPU fault raises one, wherever it ran."""
    v = verdicts["821"]
    assert v["quality"] == "ambiguous"
    assert {v["domain"], *(a["domain"] for a in v["alternatives"])} == {"workload", "gpu"}
    assert v["culprit_nodes"] == ["g21"]
    v = verdicts["822"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.exception", [])
    assert role_of(v, "gpu_xid") == "context"


def test_the_jobs_own_gpu_failing_in_the_span_of_an_unstamped_program_error_on_its_node_competes(verdicts):
    """On one node, an unstamped line whose span holds a GPU fault's moment would count as
    the fault's local consequence; a KeyError is no GPU's consequence: two explanations.
    A node whose GPUs the topology lists is held whole with as many (a 4-GPU tray), not
    with 4 of its 8."""
    for job, node in (("823", "g24"), ("824", "g25")):
        v = verdicts[job]
        assert v["quality"] == "ambiguous", job
        assert {v["domain"], *(a["domain"] for a in v["alternatives"])} == {"workload", "gpu"}, job
        assert v["culprit_nodes"] == [node], job
    v = verdicts["825"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.exception", [])


def test_a_storage_fault_of_another_node_no_error_confirms_is_outranked_by_a_program_error(verdicts):
    """A KeyError on g27 is the job's own; g28's NFS client losing its server twenty seconds
    before, which no rank of g28 noticed, did not raise it. On the KeyError's own node the
    lost server stays a root candidate."""
    v = verdicts["826"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.exception", [])
    assert role_of(v, "storage.nfs_server_state") == "context"
    assert role_of(verdicts["827"], "storage.nfs_server_state") == "root_candidate"
