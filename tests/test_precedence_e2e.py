"""Precedence rules end to end: a node's hardware report outranks the symptoms the job
printed of it, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import role_of, syslog, verdicts_by_job

# The NVSwitch driver's fatal form, "<SXid>, Fatal, Link <n> <what>": as NVIDIA/nvtrust#124
# prints the non-fatal one, for SXid 12028 ("egress nonposted PRIV error", Fatal in the
# fabric manager guide's table, leptonai/gpud#338).
SXID_FATAL = "nvidia-nvswitch2: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 32 egress non-posted PRIV error (First)"
# pytorch/pytorch#49832
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n1|gres/gpu=8,node=1
"""


def test_a_fatal_nvswitch_error_outranks_the_cuda_error_it_caused(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "n1.log").write_text(syslog("n1", ("10:20:00", f"kernel: {SXID_FATAL}")))
    (logs / "slurm-700.out").write_text(f"[2026-11-20 10:20:01,000] {LAUNCH_FAILURE}\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["700"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("nvlink", "nvlink.nvswitch_fatal", ["n1"])
    assert v["quality"] == "definitive" and not v["alternatives"]
    assert role_of(v, "cuda.unspecified_launch_failure") == "confirmation"
