"""A loss that went NaN beside a GPU memory error is no plain divergence of the job's own.

An uncorrectable (double-bit) error anywhere in the job corrupts what its all-reduce spreads
to every rank, so rank 0's NaN, unstamped or printed just before the driver's line, is its
symptom (``precedence.memory_error_over_non_finite_loss``). A row the GPU marked for
remapping seconds before the rank on that node found a NaN (or within the span of an
unstamped NaN) is a rival the verdict cannot rule out (``rules/memory_nan.py``); a lone row marking long before, or on another node, is
not. Real lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import LOSS_ITERATION, role_of, syslog, verdicts_by_job
from tests.test_earlier_job import XID_48
from tests.test_earlier_outage import NAN_GRAD
from tests.test_precedence_e2e import XID_63

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
900|900|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|m[1-2]|gres/gpu=16,node=2
901|901|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|m3|gres/gpu=8,node=1
902|902|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|m4|gres/gpu=8,node=1
903|903|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|m[5-6]|gres/gpu=16,node=2
904|904|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:22:00|m7|gres/gpu=8,node=1
"""
# The trainer's own check of its loss (gist-ailab/uoais#16), unstamped behind srun's label.
NAN_LOSS = "0: FloatingPointError: Loss became infinite or NaN at iteration=58213!"
TORCHRUN_SIGTERM = ("{task}: W1120 {clock}.938633 63204 torch/distributed/elastic/multiprocessing/api.py:897] "
                    "Sending process 63205 closing signal SIGTERM\n")


def _step(clock: str) -> str:
    return LOSS_ITERATION.format(task=0, clock=clock, n=7800, samples=7800 * 1024) + "\n"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory_nan")
    logs = root / "logs"
    logs.mkdir()
    # 900: m2's GPU took a double-bit error at 10:20:18; rank 0 on m1 found the loss NaN,
    # its traceback unstamped after the step at 10:20:13.
    (logs / "m1.log").write_text(syslog("m1", ("10:00:00", "kernel: ok")))
    (logs / "m2.log").write_text(syslog("m2", ("10:20:18", f"kernel: {XID_48}")))
    (logs / "slurm-900.out").write_text(_step("10:20:13") + NAN_LOSS + "\n" + TORCHRUN_SIGTERM.format(task=0, clock="10:20:40"))
    # 901: m3's GPU marked a row for remapping half a minute before its rank found a NaN in
    # its gradients (one step of a large model). 902: the same marking twenty minutes
    # before. 903: on the job's other node, two seconds before.
    (logs / "m3.log").write_text(syslog("m3", ("10:19:43", f"kernel: {XID_63}")))
    (logs / "m4.log").write_text(syslog("m4", ("10:00:13", f"kernel: {XID_63}")))
    (logs / "m5.log").write_text(syslog("m5", ("10:00:00", "kernel: ok")))
    (logs / "m6.log").write_text(syslog("m6", ("10:20:11", f"kernel: {XID_63}")))
    # 904: the NaN traceback is unstamped after a step two minutes earlier; m7's row
    # marking falls inside its span, before the next stamped line.
    (logs / "m7.log").write_text(syslog("m7", ("10:20:00", f"kernel: {XID_63}")))
    (logs / "slurm-904.out").write_text(_step("10:18:00") + NAN_LOSS + "\n" + TORCHRUN_SIGTERM.format(task=0, clock="10:20:40"))
    for job in ("901", "902", "903"):
        (logs / f"slurm-{job}.out").write_text(
            _step("10:20:00") + f"0: [2026-11-20 10:20:13] [rank0]: {NAN_GRAD}\n" + TORCHRUN_SIGTERM.format(task=0, clock="10:20:40"))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_double_bit_error_elsewhere_explains_rank_0s_nan(verdicts):
    v = verdicts["900"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu_memory", "gpu_memory.uncorrectable_ecc", ["m2"])
    assert v["quality"] in ("definitive", "probable")
    assert role_of(v, "framework.non_finite_loss") != "root_candidate"


@pytest.mark.parametrize("job, node", [("901", "m3"), ("904", "m7")])
def test_a_row_marked_seconds_before_the_nan_on_its_node_is_a_rival(verdicts, job, node):
    v = verdicts[job]
    assert v["quality"] != "definitive" and node in v["culprit_nodes"]
    assert {v["domain"], *(a["domain"] for a in v["alternatives"])} >= {"gpu_memory", "workload"}


@pytest.mark.parametrize("job", ["902", "903"])
def test_a_row_marked_long_before_or_on_another_node_is_no_rival(verdicts, job):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == (
        "workload", "workload.non_finite_loss", [], "definitive")
    assert v["alternatives"] == []
