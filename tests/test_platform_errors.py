"""Hardware errors as arm64 servers (Grace Hopper) and firmware-first platforms report them,
end to end: a fatal APEI record, an external abort that killed a rank, an uncorrectable
DRAM error the kernel recovered from without harm, a C2C error the link corrected, and
the node's MPS daemon crashing under its clients, the IOMMU refusing an HCA's DMA mid-run
(and a fault left at boot, which a long run outlived), and a node whose GPUs refused each other
peer access. Real line formats (kernel sources,
NVIDIA's catalog), landed through the Slurm connector and the files landing, attributed
by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, CUDA_OOM, ITERATION, syslog, verdicts_by_job, watchdog_timeout

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
600|600|ckpt|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g1|gres/gpu=4,node=1
601|601|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[2-3]|gres/gpu=8,node=2
602|602|train|alice|NODE_FAIL|0:0|2026-11-20T10:00:00|2026-11-20T10:25:00|g[4-5]|gres/gpu=8,node=2
603|603|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g6|gres/gpu=4,node=1
604|604|infer|bob|FAILED|1:0|2026-11-20T10:05:00|2026-11-20T10:06:00|g7|gres/mps=50,node=1
605|605|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g[8-9]|gres/gpu=8,node=2
606|606|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:45:00|g10|gres/gpu=4,node=1
607|607|finetune|carol|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:02:00|g11|gres/gpu=4,node=1
"""
# drivers/iommu/intel/dmar.c's fault report (opencomputeproject/OpenNetworkLinux#897's
# line), here for the HCA at c1:00.0, and the same report left by firmware at boot.
DMAR = "kernel: [ 8102.868940] DMAR: [DMA Write NO_PASID] Request device [c1:00.0] fault addr 0x0 [fault reason 0x05] PTE Write access is not set"
DMAR_BOOT = ("kernel: [    0.361089] DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 "
             "[fault reason 0x01] Present bit in root entry is clear")
# drivers/edac/ghes_edac.c and mm/memory-failure.c: a UE in a free page, handled.
EDAC_UE = "EDAC MC2: 1 UE multi-bit ECC on unknown memory (node:0 card:0 module:0 rank:0 page:0xc17a9e offset:0x0)"
RECOVERED = "Memory failure: 0xc17a9e: recovery action for free buddy page: Recovered"
QUOTA = "OSError: [Errno 122] Disk quota exceeded"
# arch/arm64/mm/fault.c via arm64_show_signal(): a rank killed by a synchronous external abort.
SEA = ("pt_main_thread[55285]: unhandled exception: DABT (lower EL), ESR 0x0000000092000010, "
       "synchronous external abort in libtorch_cuda.so[ffff8a200000+5e1c000]")
# drivers/firmware/efi/cper.c: a fatal record, the node gone before the kernel said more.
GHES_FATAL = ("{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 2",
              "{1}[Hardware Error]: event severity: fatal",
              "{1}[Hardware Error]:  Error 0, type: fatal",
              "{1}[Hardware Error]:   section_type: ARM processor error")
# NVIDIA's catalog: XID 121, C2C link error, immediate action IGNORE.
XID_121 = "NVRM: Xid (PCI:0029:01:00): 121, pid='<unknown>', name=<unknown>, C2C Link corrected error (0x00000001)"
# ray-project/ray_lightning#24: NCCL's P2P/IPC channel refused (cudaErrorPeerAccessUnsupported).
PEER_ACCESS = "transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices"
MPS_SEGFAULT = ("nvidia-cuda-mps[1833336]: segfault at 8 ip 000055d1c2a4b2f1 sp 00007ffd3b9c7e10 error 4 in "
                "nvidia-cuda-mps-control[55d1c2a30000+2d000]")
# NVIDIA/nvidia-container-toolkit#714
MPS_CLIENT = ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
              "calling NumCudaDevices() that might have already set an error? Error 805: MPS client failed to "
              "connect to the MPS control daemon or the MPS server.")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("platform")
    logs = root / "logs"
    logs.mkdir()
    # 600: a UE in a free page at 10:10, recovered; the checkpoint hit the quota at 10:14.
    (logs / "g1.log").write_text(syslog("g1", ("10:05:00", ALIVE), ("10:10:00", f"kernel: {EDAC_UE}"),
                                        ("10:10:00", f"kernel: {RECOVERED}"), ("10:25:00", ALIVE)))
    (logs / "slurm-600.out").write_text(f"0: [2026-11-20 10:13:00,000] {ITERATION}\n0: {QUOTA}\n")
    # 601: g3's rank 12 died of an external abort; the others timed out waiting for it.
    for node in ("g2", "g3"):
        lines = [("10:05:00", ALIVE), ("10:25:00", ALIVE)]
        if node == "g3":
            lines.insert(1, ("10:12:00", f"kernel: {SEA}"))
        (logs / f"{node}.log").write_text(syslog(node, *lines))
    (logs / "slurm-601.out").write_text(
        f"0: [2026-11-20 10:11:00,000] {ITERATION}\n" + "".join(watchdog_timeout(r, "10:22:00") + "\n" for r in range(8)))
    # 602: g5's firmware logged a fatal ARM processor error; nothing more came from it.
    (logs / "g4.log").write_text(syslog("g4", ("10:05:00", ALIVE), ("10:24:00", ALIVE)))
    (logs / "g5.log").write_text(syslog("g5", ("10:05:00", ALIVE), *(("10:11:00", f"kernel: {line}") for line in GHES_FATAL)))
    (logs / "slurm-602.out").write_text(f"0: [2026-11-20 10:10:00,000] {ITERATION}\n")
    # 603: the C2C link corrected an error at 10:08; the job ran out of memory at 10:09.
    (logs / "g6.log").write_text(syslog("g6", ("10:05:00", ALIVE), ("10:08:00", f"kernel: {XID_121}"),
                                        ("10:25:00", ALIVE)))
    (logs / "slurm-603.out").write_text(f"0: [2026-11-20 10:09:00,000] {CUDA_OOM}\n")
    # 604: g7's MPS control daemon crashed before the job started; its client could not connect.
    (logs / "g7.log").write_text(syslog("g7", ("10:03:10", f"kernel: {MPS_SEGFAULT}"), ("10:05:30", ALIVE)))
    (logs / "slurm-604.out").write_text(f"0: [2026-11-20 10:05:20,000] {MPS_CLIENT}\n")
    # 605: g9's HCA lost its DMA at 10:12; every rank timed out ten minutes later.
    (logs / "g8.log").write_text(syslog("g8", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "g9.log").write_text(syslog("g9", ("10:05:00", ALIVE), ("10:12:00", DMAR), ("10:25:00", ALIVE)))
    (logs / "slurm-605.out").write_text(
        f"0: [2026-11-20 10:11:00,000] {ITERATION}\n" + "".join(watchdog_timeout(r, "10:22:00") + "\n" for r in range(8)))
    # 606: g10 booted at 09:50 with a fault firmware left; the job ran out of memory at 10:40.
    (logs / "g10.log").write_text(syslog("g10", ("09:50:00", DMAR_BOOT), ("10:05:00", ALIVE), ("10:44:00", ALIVE)))
    (logs / "slurm-606.out").write_text(f"0: [2026-11-20 10:10:00,000] {ITERATION}\n0: [2026-11-20 10:40:00,000] {CUDA_OOM}\n")
    # 607: every rank of g11's torchrun failed to open its P2P channel at NCCL's init.
    (logs / "g11.log").write_text(syslog("g11", ("10:00:10", ALIVE), ("10:03:00", ALIVE)))
    (logs / "slurm-607.out").write_text("".join(
        f"[rank{r}]:g11:{6506 + r}:{6512 + r} [{r}] NCCL INFO Channel 00/0 : {r}[{r}] -> {(r + 1) % 4}[{(r + 1) % 4}] via P2P/IPC\n"
        f"[rank{r}]:g11:{6506 + r}:{6512 + r} [{r}] {PEER_ACCESS}\n"
        f"[rank{r}]:[E1120 10:01:10.000000 {6506 + r} ProcessGroupNCCL.cpp:1985] NCCL error: unhandled cuda error "
        f"(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        for r in range(4)))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_an_uncorrectable_error_the_kernel_recovered_from_ended_nothing(verdicts):
    v = verdicts["600"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.quota_exceeded", [])


def test_an_external_abort_that_killed_a_rank_is_its_nodes_hardware(verdicts):
    v = verdicts["601"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.machine_check", ["g3"])


def test_a_fatal_firmware_record_is_the_lost_nodes_hardware(verdicts):
    v = verdicts["602"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.machine_check", ["g5"])


def test_a_c2c_error_the_link_corrected_is_context(verdicts):
    v = verdicts["603"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])


def test_the_nodes_mps_daemon_crashing_fails_its_clients(verdicts):
    v = verdicts["604"]
    assert (v["domain"], v["culprit_nodes"]) == ("host", ["g7"])
    assert v["cause"] in ("host.daemon_crash", "host.mps_unavailable")


def test_the_iommu_refusing_a_devices_dma_is_its_nodes_fault(verdicts):
    v = verdicts["605"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.iommu_fault", ["g9"])


def test_gpus_refused_peer_access_are_their_nodes_platform(verdicts):
    v = verdicts["607"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.gpu_peer_access_blocked", ["g11"])


def test_a_dma_fault_left_at_boot_is_not_a_long_runs_root(verdicts):
    v = verdicts["606"]
    assert (v["domain"], v["cause"]) == ("workload", "workload.cuda_oom")
