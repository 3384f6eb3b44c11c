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
# The AER line's form on a NIC (an e1000e in the pack's tests; here the HCA's function) and
# the mlx5 health poller's (the pack's fabric.mlx5_health_fatal test lines).
AER_ON_HCA = "mlx5_core 0000:c0:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"
HCA_DEAD = "mlx5_core 0000:c0:00.0: poll_health:802:(pid 0): device's health compromised - reached miss count"
# pytorch/pytorch#49832
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n1|gres/gpu=8,node=1
701|701|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n2|gres/gpu=8,node=1
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


def test_a_nics_failure_outranks_the_pcie_error_on_it(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "n2.log").write_text(syslog("n2", ("10:20:00", f"kernel: {AER_ON_HCA}"), ("10:20:01", f"kernel: {HCA_DEAD}")))
    (logs / "slurm-701.out").write_text("[2026-11-20 10:10:00,000] step 100\n")
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["701"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.nic_hardware_fault", ["n2"])
    assert v["quality"] != "ambiguous" and not v["alternatives"]
