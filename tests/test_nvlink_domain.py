"""NVLink5 faults in a multi-node NVLink domain (GB200 NVL72): one switch tray's fault reaches
the GPUs of several compute trays at once and names none of them (``names_node:
one_node``); one tray's fault names that tray; and a GPU that fell off the bus takes the
NVLink5 errors its peers print at once as its echo (precedence.fallen_off_bus_over_nvlink_domain),
not as rivals, while another 8-GPU server's XID 74 a second before it is a rival: that
server's NVLink ends at its own chassis. Real lines, landed through the Slurm connector and the files landing,
attributed by a run. NCCL's report that multi-node NVLink is there but unusable (no IMEX
channel) names the tray whose ranks alone print it, and none when every tray's do."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job

# NCCL's src/mnnvl.cc: fabric memory could not be allocated (no IMEX channel), printed by
# each rank of a tray behind NCCL's host:pid:tid prefix (srun --label's task id first).
MNNVL = ("{slot}: {node}:4821{slot}:4821{slot} [{slot}] mnnvl.cc:83 NCCL WARN MNNVL (cliqueSize 16) is available but not "
         "working on this system. Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels). "
         "Set NCCL_MNNVL_ENABLE=0 to ignore this issue.\n")

# https://github.com/leptonai/gpud/pull/1174 (a GB200 tray's NVLink5 NETIR fault)
XID_149 = ("kernel: NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 01 "
           "(0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
# NVIDIA's XID catalog: 74, NVLink error (an HGX server's NVLink, within its chassis)
XID_74 = ("kernel: NVRM: Xid (PCI:0000:ba:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected "
          "on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID_79 = "kernel: NVRM: Xid (PCI:0019:01:00): 79, GPU has fallen off the bus."

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
{job}|{job}|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|t[1-4]|gres/gpu=16,node=4
"""


def _verdict(tmp_path, job: str, faults: dict[str, tuple[str, str]], output: str = "") -> dict:
    """The verdict of a four-tray job whose trays' syslogs hold ``faults`` (node → (clock,
    line)) between ordinary lines, and whose output has ``output`` after an iteration."""
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    for node in ("t1", "t2", "t3", "t4"):
        lines = [("10:05:00", ALIVE), *([faults[node]] if node in faults else []), ("10:25:00", ALIVE)]
        (logs / f"{node}.log").write_text(syslog(node, *lines))
    (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:10:00,000] {ITERATION}\n{output}")
    return verdicts_by_job(tmp_path, SACCT.format(job=job), logs, date(2026, 11, 20))[job]


def test_a_fault_on_every_tray_at_once_names_no_tray(tmp_path):
    at_once = {node: (f"10:20:0{k}", XID_149) for k, node in enumerate(("t1", "t2", "t3", "t4"))}
    v = _verdict(tmp_path, "810", at_once)
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == ("nvlink", "nvlink.link_error", [], [])


def test_one_trays_fault_names_that_tray(tmp_path):
    v = _verdict(tmp_path, "811", {"t3": ("10:20:00", XID_149)})
    assert (v["domain"], v["culprit_nodes"]) == ("nvlink", ["t3"])


def test_a_gpu_off_the_bus_outranks_its_peers_nvlink_errors(tmp_path):
    faults = {"t2": ("10:20:00", XID_79), **{node: ("10:20:01", XID_149) for node in ("t1", "t3", "t4")}}
    v = _verdict(tmp_path, "812", faults)
    assert (v["domain"], v["cause"], v["quality"], v["culprit_nodes"]) == (
        "gpu", "gpu.fallen_off_bus", "definitive", ["t2"])
    assert v["alternatives"] == []


def test_another_servers_nvlink_error_beside_a_lost_gpu_is_a_rival(tmp_path):
    v = _verdict(tmp_path, "813", {"t1": ("10:20:00", XID_74), "t2": ("10:20:01", XID_79)})
    assert v["quality"] == "ambiguous"
    assert v["culprit_nodes"] == ["t1", "t2"]


def test_an_imex_channel_missing_on_one_tray_names_it_and_on_every_tray_none(tmp_path):
    one = _verdict(tmp_path / "one", "814", {}, MNNVL.format(slot=2, node="t3"))
    assert (one["domain"], one["cause"], one["culprit_nodes"]) == ("nvlink", "nvlink.imex_channel_unavailable", ["t3"])
    every = _verdict(tmp_path / "every", "815", {}, "".join(MNNVL.format(slot=k, node=f"t{k + 1}") for k in range(4)))
    assert (every["domain"], every["cause"], every["culprit_nodes"]) == ("nvlink", "nvlink.imex_channel_unavailable", [])
