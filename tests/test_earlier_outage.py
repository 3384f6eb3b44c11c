"""A port that flapped and came back long before an attempt started failing is not its root,
whatever else the attempt's nodes printed around it: the job that ran there before (its
processes torn down with XID 45 on another node, in this attempt's ``lookback``) does not
make the attempt start failing before it started, NCCL errors printed long after the link
came back are another fault's, not the flap's, the watchdog timeouts first linked to the
flap corroborate the root that stands instead, and a transceiver's error its port recovered
from (reseated) is no root of an error the job printed forty minutes later; nor is a bounce
no network error was tied to beside the job's own error on another node. Real lines,
landed through the Slurm connector and the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import (
    CUDA_OOM, ITERATION, LOSS_ITERATION, XID_79, role_of, syslog, verdicts_by_job, watchdog_timeout,
)
from tests.test_ib_peer import retry_exceeded

# https://github.com/leptonai/gpud/pull/1209 (an IB port's flap, down then back up)
LINK_DOWN = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"
LINK_UP = "kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150 (a process torn down)
XID_45 = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
830|830|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T12:00:00|k[1-2]|gres/gpu=16,node=2
831|831|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:40:00|k[3-5]|gres/gpu=24,node=3
832|832|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:16:00|k[6-7]|gres/gpu=16,node=2
833|833|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:47:00|k[8-9]|gres/gpu=16,node=2
834|834|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T11:05:00|k[10-11]|gres/gpu=16,node=2
835|835|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:47:00|k[12-13]|gres/gpu=16,node=2
836|836|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:47:00|k[14-15]|gres/gpu=16,node=2
837|837|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:47:00|k16|gres/gpu=8,node=1
838|838|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:08:00|k[17-18]|gres/gpu=16,node=2
839|839|hvd|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T13:06:49|k[19-20]|gres/gpu=16,node=2
840|840|hvd|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T13:06:49|k[21-22]|gres/gpu=16,node=2
841|841|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:47:00|k[23-24]|gres/gpu=16,node=2
842|842|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:50:00|k[25-26]|gres/gpu=16,node=2
843|843|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:50:00|k[27-28]|gres/gpu=16,node=2
844|844|train|alice|TIMEOUT|0:0|2026-11-20T10:00:00|2026-11-20T14:00:05|k[29-30]|gres/gpu=16,node=2
845|845|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:52|k[31-32]|gres/gpu=16,node=2
846|846|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:52|k[33-34]|gres/gpu=16,node=2
847|847|sft|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:51:00|k35|gres/gpu=8,node=1
848|848|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:52|k[36-37]|gres/gpu=16,node=2
849|849|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:21:52|k[38-39]|gres/gpu=16,node=2
"""
# The ice driver's port going down and back up (ice_print_link_msg() in
# drivers/net/ethernet/intel/ice/ice_main.c; the up line as rules/fabric.yaml tests it).
ICE_DOWN = "kernel: ice 0000:31:00.1 eno2: NIC Link is Down"
ICE_UP = ("kernel: ice 0000:31:00.1 eno2: NIC Link is up 25 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: "
          "RS-FEC, Autoneg Advertised: On, Autoneg Negotiated: False, Flow Control: None")
# Megatron-LM's check before the gradients' all-reduce, as rules/cuda_framework.yaml tests it.
NAN_GRAD = ("AssertionError: Rank 0: found NaN in local grad norm in backward pass before data-parallel "
            "communication collective. Device: 0")
# Horovod's word on the other ranks once one failed, behind Open MPI's --tag-output prefix
# (horovod/horovod#3412).
HOROVOD_SHUT_DOWN = ("[1,{r}]<stderr>:Horovod has been shut down. This was caused by an exception on one of the ranks "
                     "or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished "
                     "execution. If the shutdown was caused by an exception, you should see the exception in the log "
                     "before the first shutdown message.")
# The NFS client's reports of a server that stopped answering and came back (the kernel's
# "not responding, still trying" and "OK", as leptonai/gpud's NFS matcher and
# kangear/tiny210v2-uboot#5 show them).
NFS_DOWN = "kernel: nfs: server {server} not responding, still trying"
NFS_OK = "kernel: nfs: server {server} OK"
# A Lustre client that lost its metadata target and got it back 40 s later
# (aws/aws-parallelcluster#2701: the loss and the RPC timeouts it printed meanwhile; the
# restore in the client's "Connection restored to <target> (at <nid>)" words).
LUSTRE_LOST = ("kernel: [268274.472582] Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection to no2zxbmv-MDT0000 "
               "(at 10.0.47.232@tcp) was lost; in progress operations using this service will wait for recovery to "
               "complete")
LUSTRE_RPC_TIMEOUT = ("kernel: [268280.616562] Lustre: 3315:0:(client.c:2116:ptlrpc_expire_one_request()) @@@ Request "
                      "sent has timed out for slow reply: [sent 1619790610/real 1619790610]  req@0000000052a0ed37 "
                      "x1698193162592192/t0(0) o38->no2zxbmv-MDT0000-mdc-000000001785e248@10.0.47.232@tcp:12/10 lens "
                      "520/544 e 0 to 1")
LUSTRE_RESTORED = ("kernel: [268314.100000] Lustre: no2zxbmv-MDT0000-mdc-000000001785e248: Connection restored to "
                   "no2zxbmv-MDT0000 (at 10.0.47.232@tcp)")
# mlx5's port module events (drivers/net/ethernet/mellanox/mlx5/core/events.c), as
# leptonai/gpud's kmsg matcher tests and geerlingguy/arm-nas#16 show them: a transceiver
# too hot took its port down, and came back once reseated.
MODULE_HOT = "kernel: mlx5_core 0000:4b:00.0: Port module event[error]: module 3, Cable error, High Temperature"
MODULE_PLUGGED = "kernel: mlx5_core 0000:4b:00.0: Port module event: module 3, Cable plugged"
# https://github.com/QwenLM/Qwen-VL/issues/142
SHAPE_ERROR = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("earlier_outage")
    logs = root / "logs"
    logs.mkdir()
    # 830: the job before it lost k1's port at 09:40 and was torn down on k2; this attempt
    # ran two hours, until k2's GPU fell off the bus.
    (logs / "k1.log").write_text(syslog("k1", ("09:40:00", LINK_DOWN), ("09:40:05", LINK_UP), ("11:00:00", "kernel: ok")))
    (logs / "k2.log").write_text(syslog("k2", ("09:40:20", XID_45), ("11:50:00", f"kernel: {XID_79}")))
    (logs / "slurm-830.out").write_text(f"0: [2026-11-20 11:30:00,000] {ITERATION}\n")
    # 831: k3's port flapped at 10:05 and came back; at 10:28 k5's port went down, and the
    # others' NCCL ranks gave up on it.
    (logs / "k3.log").write_text(syslog("k3", ("10:05:00", LINK_DOWN), ("10:05:05", LINK_UP)))
    (logs / "k4.log").write_text(syslog("k4", ("10:20:00", "kernel: ok")))
    (logs / "k5.log").write_text(syslog("k5", ("10:28:00", LINK_DOWN)))
    (logs / "slurm-831.out").write_text(
        f"0: [2026-11-20 10:27:50,000] {ITERATION}\n"
        + "".join(retry_exceeded(*r) + "\n" for r in [(3, "k3", "10.22.0.5"), (11, "k4", "10.22.0.5")])
    )
    # 832: k6's port flapped at 09:50, before the job; k7's GPU fell off the bus at 10:05 and
    # k6's ranks timed out on it ten minutes later.
    (logs / "k6.log").write_text(syslog("k6", ("09:50:00", LINK_DOWN), ("09:50:05", LINK_UP), ("10:10:00", "kernel: ok")))
    (logs / "k7.log").write_text(syslog("k7", ("09:55:00", "kernel: ok"), ("10:05:00", f"kernel: {XID_79}")))
    (logs / "slurm-832.out").write_text(
        f"0: [2026-11-20 10:04:00,000] {ITERATION}\n" + "".join(watchdog_timeout(r, "10:15:00") + "\n" for r in range(8))
    )
    # 833: k8's Lustre client lost its target at 10:05 and had it back 40 s later, its RPC
    # timeouts printed meanwhile; the job ran on until its own error at 10:45.
    (logs / "k8.log").write_text(syslog("k8", ("10:05:00", LUSTRE_LOST), ("10:05:06", LUSTRE_RPC_TIMEOUT),
                                        ("10:05:40", LUSTRE_RESTORED), ("10:30:00", "kernel: ok")))
    (logs / "k9.log").write_text(syslog("k9", ("10:30:00", "kernel: ok")))
    (logs / "slurm-833.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n1: [2026-11-20 10:45:00,000] {SHAPE_ERROR}\n")
    # 834: k10's transceiver overheated at 10:20 and was back 9 s later; the job trained on
    # until a rank on k11 ran out of GPU memory at 11:01.
    (logs / "k10.log").write_text(syslog("k10", ("10:20:00", MODULE_HOT), ("10:20:09", MODULE_PLUGGED),
                                         ("10:50:00", "kernel: ok")))
    (logs / "k11.log").write_text(syslog("k11", ("10:50:00", "kernel: ok")))
    (logs / "slurm-834.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n8: [2026-11-20 11:01:36,000] {CUDA_OOM}\n")
    # 835: k12's NFS server stopped answering at 10:05 and was back 25 s later; the job ran
    # on until its own error at 10:45. 836: the same, but the server that came back is
    # another one: nas01 never answered again.
    for job, node, back in (("835", "k12", "nas01"), ("836", "k14", "nas02")):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", NFS_DOWN.format(server="nas01")),
                                                 ("10:05:25", NFS_OK.format(server=back)), ("10:30:00", "kernel: ok")))
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n"
                                               f"1: [2026-11-20 10:45:00,000] {SHAPE_ERROR}\n")
    for node in ("k13", "k15"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:30:00", "kernel: ok")))
    # 837: a one-node job's port went down at 10:05 for good (its leaf switch died); the job's
    # collectives ran over NVLink, and it trained on until it ran out of GPU memory at 10:45.
    # 838: k17's port went down at 10:05 and the other node's NCCL gave up on it at once.
    (logs / "k16.log").write_text(syslog("k16", ("10:05:00", LINK_DOWN), ("10:30:00", "kernel: ok")))
    (logs / "slurm-837.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n0: [2026-11-20 10:45:00,000] {CUDA_OOM}\n")
    (logs / "k17.log").write_text(syslog("k17", ("10:05:00", LINK_DOWN)))
    (logs / "k18.log").write_text(syslog("k18", ("10:04:00", "kernel: ok")))
    (logs / "slurm-838.out").write_text(f"0: [2026-11-20 10:04:50,000] {ITERATION}\n"
                                        + retry_exceeded(11, "k18", "10.22.0.17") + "\n")
    # 841: k23's Lustre client logged its request to the target timing out half a minute
    # before it declared the connection lost (as Lustre does), and had it back 40 s later;
    # at 10:30 every rank but 0 entered a collective rank 0 never joined (its own work).
    (logs / "k23.log").write_text(syslog("k23", ("10:04:32", LUSTRE_RPC_TIMEOUT), ("10:05:00", LUSTRE_LOST),
                                         ("10:05:40", LUSTRE_RESTORED), ("10:30:00", "kernel: ok")))
    (logs / "k24.log").write_text(syslog("k24", ("10:30:00", "kernel: ok")))
    (logs / "slurm-841.out").write_text(f"0: [2026-11-20 10:29:00,000] {ITERATION}\n"
                                        + "".join(watchdog_timeout(r, "10:40:00") + "\n" for r in range(1, 16)))
    # 842: k25's NVMe timed out a command at 10:05 and the driver's abort of it succeeded
    # (linux-surface/linux-surface#733's two lines); the job trained on until a rank on k26
    # ran out of GPU memory at 10:48. 843: the same abort, and nothing else went wrong.
    nvme = ("kernel: nvme nvme0: I/O 12 QID 5 timeout, aborting", "kernel: nvme nvme0: Abort status: 0x0")
    for job, first, second in (("842", "k25", "k26"), ("843", "k27", "k28")):
        (logs / f"{first}.log").write_text(syslog(first, ("10:05:00", nvme[0]), ("10:05:00", nvme[1]),
                                                  ("10:30:00", "kernel: ok")))
        (logs / f"{second}.log").write_text(syslog(second, ("10:30:00", "kernel: ok")))
        oom = f"8: [2026-11-20 10:48:00,000] {CUDA_OOM}\n" if job == "842" else ""
        (logs / f"slurm-{job}.out").write_text(f"0: [2026-11-20 10:40:00,000] {ITERATION}\n" + oom)
    # 839: k20's port flapped at 11:02 and was back 3 s later; the job, whose output (mpirun
    # --tag-output, Horovod's example) holds no stamp at all, died when rank 10 ran out of
    # GPU memory, two hours later by its end. 840: the same flap, and the output says only
    # that Horovod shut down: nothing else explains the failure.
    for job, first, second in (("839", "k19", "k20"), ("840", "k21", "k22")):
        (logs / f"{first}.log").write_text(syslog(first, ("10:30:00", "kernel: ok")))
        (logs / f"{second}.log").write_text(syslog(second, ("11:02:10", LINK_DOWN), ("11:02:13", LINK_UP)))
        oom = f"[1,10]<stderr>:{CUDA_OOM}\n" if job == "839" else ""
        (logs / f"slurm-{job}.out").write_text("[1,0]<stdout>:Train Epoch: 1 [1280/1281167 (0%)]\tLoss: 3.350256\n" + oom
                                               + "".join(HOROVOD_SHUT_DOWN.format(r=r) + "\n" for r in range(16) if r != 10))
    # 844: both nodes' NFS server stopped answering at 10:12:40; the collective hung at
    # 10:13:05 (the watchdog fired at 10:23:05); the server was back at 11:36, and the job
    # sat hung until its time limit at 14:00.
    for node in ("k29", "k30"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:12:40", NFS_DOWN.format(server="nfs01")),
                                                 ("11:36:00", NFS_OK.format(server="nfs01"))))
    (logs / "slurm-844.out").write_text(
        f"0: [2026-11-20 10:11:00,000] {ITERATION}\n" + "".join(watchdog_timeout(r, "10:23:05") + "\n" for r in range(16))
        + "slurmstepd: error: *** JOB 844 ON k29 CANCELLED AT 2026-11-20T14:00:00 DUE TO TIME LIMIT ***\n")
    # 845: k31's port bounced at 10:20:18 and was back 8 s later; no rank printed a NET/IB
    # error, and the job reported its next step at 10:20:41. Then a rank on k32 ran out of
    # GPU memory, its traceback unstamped, torchrun's SIGTERM fan-out at 10:21:33. 846: the
    # same, but the last step reported came before the bounce: the job may have died of it.
    for job, first, second, step in (("845", "k31", "k32", "10:20:41"), ("846", "k33", "k34", "10:20:10")):
        (logs / f"{first}.log").write_text(syslog(first, ("10:20:18", LINK_DOWN), ("10:20:26", LINK_UP)))
        (logs / f"{second}.log").write_text(syslog(second, ("10:10:00", "kernel: ok")))
        (logs / f"slurm-{job}.out").write_text(
            LOSS_ITERATION.format(task=0, clock="10:19:41", n=7800, samples=7800 * 1024) + "\n"
            + LOSS_ITERATION.format(task=0, clock=step, n=7900, samples=7900 * 1024) + "\n"
            + f"1: [rank10]: {CUDA_OOM}\n"
            + "1: W1120 10:21:33.938633 63204 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
            "63205 closing signal SIGTERM\n")
    # 847: a one-node fine-tuning job (the Transformers Trainer, whose loss reports carry no
    # stamp); k35's port went down at 10:05 for good, and the job died of a CUDA OOM whose
    # unstamped traceback lies anywhere up to torchrun's report at 10:50.
    (logs / "k35.log").write_text(syslog("k35", ("09:55:00", "kernel: ok"), ("10:05:00", LINK_DOWN)))
    (logs / "slurm-847.out").write_text(
        "[INFO|trainer.py:2314] 2026-11-20 10:00:30,280 >> ***** Running training *****\n"
        + "".join(f"{{'loss': 1.{n:04d}, 'grad_norm': 0.634, 'learning_rate': 1.9e-05, 'epoch': 0.0{n % 10}}}\n"
                  for n in range(40))
        + f"{CUDA_OOM}\n"
        "E1120 10:50:16.000000 140213371852608 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: 1) local_rank: 0 (pid: 561513) of binary: /usr/bin/python3\n")
    # 848: rank 0 on k36 found a NaN in its gradients, its traceback unstamped between the
    # step at 10:19:51 and torchrun's SIGTERM fan-out at 10:21:04; meanwhile k37's port
    # eno2 bounced for 19 s, and no rank printed a network error. 849: the same, but the
    # port never came back.
    for job, first, second, flap in (("848", "k36", "k37", (("10:20:11", ICE_DOWN), ("10:20:30", ICE_UP))),
                                     ("849", "k38", "k39", (("10:20:11", ICE_DOWN),))):
        (logs / f"{first}.log").write_text(syslog(first, ("10:10:00", "kernel: ok")))
        (logs / f"{second}.log").write_text(syslog(second, ("10:10:00", "kernel: ok"), *flap))
        (logs / f"slurm-{job}.out").write_text(
            LOSS_ITERATION.format(task=0, clock="10:19:51", n=7800, samples=7800 * 1024) + "\n"
            + f"0: [rank0]: {NAN_GRAD}\n"
            + "0: W1120 10:21:04.938633 63204 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
            "63205 closing signal SIGTERM\n")
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_a_bounce_no_network_error_was_tied_to_is_no_rival_of_the_jobs_error_elsewhere(verdicts):
    """A flap that broke the job's traffic leaves NCCL's errors behind; a NaN found before
    the gradients' all-reduce is the job's own, whatever a port elsewhere did meanwhile."""
    v = verdicts["848"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.non_finite_loss", [])
    assert v["quality"] != "ambiguous" and v["alternatives"] == []
    assert role_of(v, "fabric.ethernet_nic_link_state") == "context"


def test_a_port_that_stayed_down_stays_a_rival_of_the_jobs_error_elsewhere(verdicts):
    v = verdicts["849"]
    assert "k39" in v["culprit_nodes"] or any(a["domain"] == "network" for a in v["alternatives"])


def test_the_previous_jobs_teardown_does_not_make_an_attempt_fail_before_it_started(verdicts):
    v = verdicts["830"]
    assert (v["cause"], v["culprit_nodes"]) == ("gpu.fallen_off_bus", ["k2"])
    assert role_of(v, "fabric.mlx5_link_state") == "context"


def test_nccl_errors_long_after_a_flap_recovered_do_not_revive_it(verdicts):
    v = verdicts["831"]
    assert (v["domain"], v["culprit_nodes"]) == ("network", ["k5"])


def test_cascades_of_a_demoted_flap_corroborate_the_root_that_stands(verdicts):
    v = verdicts["832"]
    assert (v["cause"], v["culprit_nodes"], v["quality"]) == ("gpu.fallen_off_bus", ["k7"], "definitive")
    assert role_of(v, "fabric.mlx5_link_state") == "context"


def test_a_lustre_outage_its_client_recovered_from_is_no_root_of_a_later_error(verdicts):
    """The client's RPC timeouts while its target was gone, and those that made it declare
    the target lost, are the outage's own lines: they do not say the job started failing
    then."""
    v = verdicts["833"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.exception", [])
    assert role_of(v, "storage.lustre_connection_lost") == "context"
    v = verdicts["841"]
    assert (v["domain"], v["cause"], v["culprit_ranks"]) == ("workload", "workload.straggler_rank", [0])
    assert role_of(v, "storage.lustre_connection_lost") == "context"


def test_a_transceiver_error_its_port_recovered_from_is_no_root_of_a_later_error(verdicts):
    v = verdicts["834"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_port_module_event") == "context"


def test_an_nfs_server_back_only_after_the_job_hung_on_it_is_the_hangs_root(verdicts):
    """The server came back an hour after the collective hung, and the job sat hung until its
    limit: the limit is when it stopped, no rival explanation of why it hung."""
    v = verdicts["844"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", [])


def test_an_nfs_server_that_answered_again_is_no_root_of_a_later_error(verdicts):
    """Only the same server's ``OK`` ends its outage: another server answering says nothing."""
    v = verdicts["835"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.exception", [])
    assert role_of(v, "storage.nfs_server_state") == "context"
    assert verdicts["836"]["domain"] == "storage"


def test_a_port_down_for_good_that_the_job_outlived_is_no_root_of_a_later_error(verdicts):
    """A job that trained on for forty minutes did not send its traffic through the port;
    one whose peers gave up on it at once did."""
    v = verdicts["837"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_link_state") == "context"
    assert (verdicts["838"]["domain"], verdicts["838"]["culprit_nodes"]) == ("network", ["k17"])


def test_a_disk_command_the_driver_aborted_is_no_root_of_a_later_error(verdicts):
    """The NVMe driver's abort of a timed-out command succeeded and the job trained on for
    forty minutes: the out-of-memory error is its root. With nothing else, the timeout is."""
    v = verdicts["842"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "host.nvme_failure") == "context"
    assert (verdicts["843"]["cause"], verdicts["843"]["culprit_nodes"]) == ("storage.disk_timeout", ["k27"])


def test_a_flap_is_no_root_beside_an_error_that_may_have_come_long_after_it(verdicts):
    """With no stamp in the job's output, its CUDA out-of-memory error lies anywhere up to
    the end, two hours after the port came back: that error is the root. With no such error,
    the flap is all there is."""
    v = verdicts["839"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_link_state") == "context"
    v = verdicts["840"]
    assert (v["domain"], v["culprit_nodes"]) == ("network", ["k22"])


def test_a_flap_the_job_reported_steps_after_is_no_root_of_a_later_error(verdicts):
    """A step reported after the port was back says the job's traffic survived the bounce:
    the out-of-memory error that may have come after that step ended the attempt, though
    its unstamped traceback may lie within a minute of the bounce."""
    v = verdicts["845"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_link_state") == "context"


def test_a_flap_after_the_last_reported_step_stays_a_root(verdicts):
    v = verdicts["846"]
    assert v["domain"] == "network"


def test_a_port_down_for_good_is_no_root_beside_an_error_that_may_have_come_long_after_it(verdicts):
    """A one-node job's collectives do not cross its InfiniBand port: the job worked on, and
    the out-of-memory traceback, unstamped, may lie anywhere up to torchrun's report 45
    minutes after the port went down."""
    v = verdicts["847"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.cuda_oom", [])
    assert role_of(v, "fabric.mlx5_link_state") == "context"
