"""Precedence rules end to end: a node's hardware report outranks the symptoms the job
printed of it, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

from engine.run import landing_lake
from ingest.files import land_log_files
from tests.end_to_end import ALIVE, XID_79, role_of, syslog, verdicts_by_job

# The NVSwitch driver's fatal form, "<SXid>, Fatal, Link <n> <what>": as NVIDIA/nvtrust#124
# prints the non-fatal one, for SXid 12028 ("egress nonposted PRIV error", Fatal in the
# fabric manager guide's table, leptonai/gpud#338).
SXID_FATAL = "nvidia-nvswitch2: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 32 egress non-posted PRIV error (First)"
# The AER line's form on a NIC (an e1000e in the pack's tests; here the HCA's function) and
# the mlx5 health poller's (the pack's fabric.mlx5_health_fatal test lines).
AER_ON_HCA = "mlx5_core 0000:c0:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"
HCA_DEAD = "mlx5_core 0000:c0:00.0: poll_health:802:(pid 0): device's health compromised - reached miss count"
# leptonai/gpud#1209: the port's link going down, here on the failed HCA.
HCA_LINK_DOWN = "mlx5_core 0000:c0:00.0 mlx5_5: Port: 1 Link DOWN"
# lllyasviel/Fooocus#1313: PyTorch's check of the node's driver.
DRIVER_TOO_OLD = ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your "
                  "GPU driver by downloading and installing a new version from the URL: "
                  "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a "
                  "PyTorch version that has been compiled with your version of the CUDA driver.")
# pytorch/pytorch#49832
LAUNCH_FAILURE = "RuntimeError: CUDA error: unspecified launch failure"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n1|gres/gpu=8,node=1
701|701|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n2|gres/gpu=8,node=1
702|702|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n3|gres/gpu=8,node=1
703|703|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n4|gres/gpu=8,node=1
704|704|train|alice|CANCELLED by 1000|0:15|2026-11-20T10:00:00|2026-11-20T10:30:05|n5|gres/gpu=8,node=1
705|705|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:20:30|n[6-7]|gres/gpu=16,node=2
706|706|train|alice|REQUEUED|0:0|2026-11-20T10:00:00|2026-11-20T10:12:09|n8|gres/gpu=8,node=1
707|707|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n[9-10]|gres/gpu=16,node=2
708|708|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n11|gres/gpu=8,node=1
709|709|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n12|gres/gpu=8,node=1
710|710|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n13|gres/gpu=8,node=1
711|711|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|n14|gres/gpu=8,node=1
712|712|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:00:10|n15|gres/gpu=8,node=1
"""
# Megatron-LM's async checkpoint writer re-raises a worker's OSError as
# f"Worker failure: {exc}" (dist_checkpointing/strategies/filesystem_async.py); the OSError
# is ESHUTDOWN's (marbits-icm/marbits-public#139).
WORKER_FAILURE = "RuntimeError: Worker failure: [Errno 108] Cannot send after transport endpoint shutdown"
# NVIDIA/NVSentinel#155: an older driver's three-line report, here as `dmesg -T` prints it.
FALLEN_OFF = ("[Fri Nov 20 10:20:33 2026] NVRM: The NVIDIA GPU 0000:90:00.0\n"
              "                           NVRM: (PCI ID: 10de:20b2) installed in this system has\n"
              "                           NVRM: fallen off the bus and is not responding to commands.\n")


def job_verdict(tmp_path, job: str, output: str, **nodes: tuple[tuple[str, str], ...]) -> dict:
    """Write ``output`` as ``slurm-<job>.out`` and each node's (time, line) pairs as its
    syslog, land them with the file's sacct dump, run, and return job ``job``'s verdict."""
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    for node, lines in nodes.items():
        (logs / f"{node}.log").write_text(syslog(node, *lines))
    (logs / f"slurm-{job}.out").write_text(output)
    return verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))[job]


def test_a_fatal_nvswitch_error_outranks_the_cuda_error_it_caused(tmp_path):
    v = job_verdict(tmp_path, "700", f"[2026-11-20 10:20:01,000] {LAUNCH_FAILURE}\n",
                    n1=(("10:20:00", f"kernel: {SXID_FATAL}"),))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("nvlink", "nvlink.nvswitch_fatal", ["n1"])
    assert v["quality"] == "definitive" and not v["alternatives"]
    assert role_of(v, "cuda.unspecified_launch_failure") == "confirmation"


def test_a_nics_failure_outranks_the_pcie_error_on_it(tmp_path):
    v = job_verdict(tmp_path, "701", "[2026-11-20 10:10:00,000] step 100\n",
                    n2=(("10:20:00", f"kernel: {AER_ON_HCA}"), ("10:20:01", f"kernel: {HCA_DEAD}")))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.nic_hardware_fault", ["n2"])
    assert v["quality"] != "ambiguous" and not v["alternatives"]


def test_a_nics_failure_outranks_the_link_down_it_takes_its_port_to(tmp_path):
    """The kernel prints the failed HCA's port going down before its health poller finds
    the firmware dead: the port's link is the NIC's failure seen at the port, not a cable's."""
    v = job_verdict(tmp_path, "711", "[2026-11-20 10:10:00,000] step 100\n",
                    n14=(("10:20:00", f"kernel: {AER_ON_HCA}"), ("10:20:00", f"kernel: {HCA_LINK_DOWN}"),
                         ("10:20:02", f"kernel: {HCA_DEAD}")))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.nic_hardware_fault", ["n14"])
    assert role_of(v, "fabric.mlx5_link_state") == "confirmation"


def test_a_driver_too_old_for_the_jobs_cuda_is_the_nodes_not_the_jobs_exception(tmp_path):
    v = job_verdict(tmp_path, "712", f"[2026-11-20 10:00:05,000] {DRIVER_TOO_OLD}\n", n15=(("09:59:00", "kernel: ok"),))
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.driver_mismatch", ["n15"])
    assert role_of(v, "framework.python_exception") == "confirmation"


def test_the_drivers_fallen_off_the_bus_report_outranks_an_unstamped_cuda_error(tmp_path):
    """The CUDA error inherited the stamp of the iteration line before it, 43 s before the
    driver's report: it may have been printed as late as the next stamped line, so it is the
    report's symptom, not a rival root of the workload."""
    (tmp_path / "n3.dmesg").write_text(FALLEN_OFF)
    land_log_files(landing_lake(tmp_path / "lake"), [tmp_path / "n3.dmesg"], cluster="c1", source="kmsg", node="n3")
    v = job_verdict(tmp_path, "702", f"[2026-11-20 10:19:50,000] step 11000\n[rank5]: {LAUNCH_FAILURE}\n"
                    "[2026-11-20 10:20:40,000] Sending process 2363250 closing signal SIGTERM\n")
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n3"])
    assert v["quality"] != "ambiguous" and not v["alternatives"]


def test_an_exception_that_reports_a_storage_failure_is_that_failure(tmp_path):
    v = job_verdict(tmp_path, "703", f"[2026-11-20 10:20:00,000] saving checkpoint\n{WORKER_FAILURE}\n")
    assert (v["domain"], v["cause"]) == ("storage", "storage.filesystem_unavailable")
    assert v["quality"] != "ambiguous" and not v["alternatives"]


# torchrun's agent on the signal scancel sends it (NVIDIA/nvidia-resiliency-ext#18), then
# slurmstepd's banner; srun and slurmstepd write one file, and the banner can land last.
SIGNAL_ECHO = "torch.distributed.elastic.multiprocessing.api.SignalException: Process 293812 got signal: 15"


def test_the_launchers_echo_of_a_cancel_is_not_the_root(tmp_path):
    # The traceback has no stamp: it takes the progress line's, five minutes before the banner.
    v = job_verdict(tmp_path, "704", "[2026-11-20 10:25:00,000] step 900\n"
                    f"{SIGNAL_ECHO}\n"
                    "slurmstepd: error: *** JOB 704 ON n5 CANCELLED AT 2026-11-20T10:30:05 ***\n",
                    n5=(("10:00:01", ALIVE),))
    assert (v["state"], v["domain"], v["cause"]) == ("cancelled", "scheduler", "scheduler.cancelled")
    assert v["quality"] == "definitive" and not v["alternatives"]
    assert role_of(v, "framework.python_exception") == "context"


# The driver's plain line after its XID 79 on the same GPU, at one instant (the
# gpu_fallen_off_bus rule's test line), then the ranks' watchdog timeouts 600 s on.
OFF_THE_BUS = "NVRM: GPU 0000:06:00.0: GPU has fallen off the bus."
WATCHDOG = ("[rank{r}]:[E1120 10:20:04.{r:03d}000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) "
            "ran for 600010 milliseconds before timing out.")


def test_a_root_reported_twice_is_corroborated_by_the_cascade_of_either_report(tmp_path):
    v = job_verdict(tmp_path, "705", "".join(f"{r // 8}: {WATCHDOG.format(r=r)}\n" for r in range(16) if r != 3),
                    n6=(("10:10:03", f"kernel: {XID_79}"), ("10:10:03", f"kernel: {OFF_THE_BUS}")),
                    n7=(("10:00:01", ALIVE),))
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["culprit_gpus"]) == ("gpu", "gpu.fallen_off_bus", ["n6"], ["0000:06:00"])
    assert v["quality"] == "definitive"


def test_a_requeue_banner_agrees_with_sacct_requeued(tmp_path):
    # sacct's REQUEUED is normalized to preempted; slurmstepd's banner (the
    # scheduler.slurm_cancelled_due_to test line's form) says why: the two agree.
    v = job_verdict(tmp_path, "706", "slurmstepd: error: *** JOB 706 ON n8 CANCELLED AT 2026-11-20T10:12:09 DUE TO "
                    "JOB REQUEUE ***\n", n8=(("10:00:01", ALIVE),))
    assert (v["state"], v["domain"], v["cause"], v["quality"]) == ("preempted", "scheduler", "scheduler.requeued", "definitive")


# The XID 13 form of the gpu_xid rule's test line (Out Of Range Address), and CUDA's report
# of the same fault in the process (pytorch/pytorch#51382's wording).
XID_13 = ("NVRM: Xid (PCI:0000:b3:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
          "(GPC 9, TPC 2, SM 0): Out Of Range Address")
ILLEGAL_ADDRESS = "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_a_root_that_names_no_rank_takes_the_rank_whose_error_confirms_it(tmp_path):
    v = job_verdict(tmp_path, "707", f"0: [2026-11-20 10:19:59,000] step 900\n13: [rank13]: {ILLEGAL_ADDRESS}\n",
                    n9=(("10:00:01", ALIVE),), n10=(("10:20:00", f"kernel: {XID_13}"),))
    assert role_of(v, "cuda.illegal_memory_access") == "confirmation"
    assert (v["domain"], v["culprit_ranks"]) == ("workload", [13])


def test_the_confirming_rank_joins_the_ranks_another_node_hit_the_same_error_on(tmp_path):
    # Rank 1 on n9 hit the same error with no XID on its node: a culprit too, beside rank 13.
    v = job_verdict(tmp_path, "707", f"0: [2026-11-20 10:19:59,000] step 900\n13: [rank13]: {ILLEGAL_ADDRESS}\n"
                    f"1: [2026-11-20 10:20:00,500] {ILLEGAL_ADDRESS}\n",
                    n9=(("10:00:01", ALIVE),), n10=(("10:20:00", f"kernel: {XID_13}"),))
    assert (v["domain"], v["culprit_ranks"]) == ("workload", [1, 13])


# akash-network/support#244: XID 94 as the driver prints an ECC error contained at the SM.
XID_94 = "NVRM: Xid (PCI:0000:b3:00): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No"


def test_an_ecc_xid_outranks_the_xid_13_beside_it_on_the_gpu(tmp_path):
    # The kernel printed the exception first; the ECC error it reports is the root.
    v = job_verdict(tmp_path, "708", "[2026-11-20 10:10:00,000] step 100\n",
                    n11=(("10:20:00", f"kernel: {XID_13}"), ("10:20:00", f"kernel: {XID_94}")))
    assert (v["domain"], v["cause"], v["culprit_gpus"]) == ("gpu_memory", "gpu_memory.uncorrectable_ecc", ["0000:b3:00"])
    roles = {e["event"]: e["role"] for e in v["evidence"]}
    assert roles["xid_13_graphics_exception"] == "confirmation"


def test_the_cuda_error_an_outranked_xid_13_confirmed_confirms_the_ecc_xid(tmp_path):
    # The rank's error links to the XID 13; the XID 94 45 s later outranks that XID 13: the
    # error is the XID 94's confirmation, not a workload root of its own.
    v = job_verdict(tmp_path, "709", f"[2026-11-20 10:20:01,000] step 9\n[rank2]: {ILLEGAL_ADDRESS}\n",
                    n12=(("10:20:00", f"kernel: {XID_13}"), ("10:20:45", f"kernel: {XID_94}")))
    assert (v["domain"], v["culprit_gpus"], v["culprit_ranks"]) == ("gpu_memory", ["0000:b3:00"], [2])
    assert role_of(v, "cuda.illegal_memory_access") == "confirmation"


# stas00/ml-engineering's XID 63 (the gpu_xid rule's test line), on the XID 13's GPU.
XID_63 = "NVRM: Xid (PCI:0000:b3:00): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."


def test_a_row_remap_notice_confirms_no_cuda_error(tmp_path):
    # XID 63 is context: the CUDA error is the XID 13's confirmation, and names its rank.
    v = job_verdict(tmp_path, "710", f"[2026-11-20 10:20:01,000] step 9\n[rank2]: {ILLEGAL_ADDRESS}\n",
                    n13=(("10:20:00", f"kernel: {XID_63}"), ("10:20:00", f"kernel: {XID_13}")))
    assert (v["cause"], v["culprit_ranks"]) == ("workload.gpu_illegal_address", [2])
