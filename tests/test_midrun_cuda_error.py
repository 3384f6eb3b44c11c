"""CUDA's unknown error on one node's ranks well into a run that nothing else explains is
that node's GPU, never ``definitive`` (``rules/midrun_cuda_error.py``); at start-up, or on
several nodes, it names none. Landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ITERATION, role_of, syslog, verdicts_by_job, watchdog_timeout

# liunian-Jay/MU-GOT#7: PyTorch's error for cudaErrorUnknown, behind its rank prefix.
UNKNOWN = "[rank{rank}]: RuntimeError: CUDA error: unknown error"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
940|940|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|u[1-2]|gres/gpu=2,node=2
941|941|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|u[3-4]|gres/gpu=2,node=2
942|942|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:31:00|u[5-6]|gres/gpu=2,node=2
"""


def _output(errors: dict[int, str], timed_out: tuple[int, ...]) -> str:
    """A two-rank job's output (one rank a node, ``srun --label``): each rank of ``errors``
    prints a progress report stamped then and the unknown error under it; the ranks of
    ``timed_out`` time out in the collective at 10:30."""
    lines = [f"{rank}: [2026-11-20 {clock},000] {ITERATION}\n{rank}: {UNKNOWN.format(rank=rank)}\n"
             for rank, clock in errors.items()]
    return "".join(lines) + "".join(watchdog_timeout(r, "10:30:00") + "\n" for r in timed_out)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("midrun_cuda_error")
    logs = root / "logs"
    logs.mkdir()
    # 940: twenty minutes in, u2's rank got the unknown error and rank 0 waited for it.
    # 941: the same, a minute after the start (a set-up that never worked).
    # 942: both nodes' ranks got it at once, twenty minutes in.
    (logs / "slurm-940.out").write_text(_output({1: "10:20:00"}, (0,)))
    (logs / "slurm-941.out").write_text(_output({1: "10:01:00"}, (0,)))
    (logs / "slurm-942.out").write_text(_output({0: "10:20:00", 1: "10:20:00"}, ()))
    for node in ("u1", "u2", "u3", "u4", "u5", "u6"):
        (logs / f"{node}.log").write_text(syslog(node, ("09:59:00", "kernel: ok")))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_one_nodes_unknown_cuda_error_mid_run_is_its_gpu(verdicts):
    v = verdicts["940"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == (
        "gpu", "gpu.cuda_unknown_error", ["u2"], "probable")


def test_an_unknown_cuda_error_at_start_up_names_no_gpu(verdicts):
    v = verdicts["941"]
    assert (v["domain"], v["culprit_nodes"]) == ("unknown", [])
    assert role_of(v, "cuda.unknown_error") == "context"


def test_unknown_cuda_errors_on_several_nodes_name_none(verdicts):
    v = verdicts["942"]
    assert v["culprit_nodes"] == []
    assert role_of(v, "cuda.unknown_error") == "context"
