"""The ``straggler_rank`` python rule, end to end: when every rank but one reports a NCCL
watchdog timeout and nothing else explains the failure, a silent rank 0 is the root (its
own work outlasted the timeout); another silent rank is only named, as context. A time
limit that ended the job long after the collective hung (the watchdog reported and did not
abort) only stopped it; Gloo's monitored barrier names the rank that never arrived; when
every rank timed out, the one node whose kernel reported tasks hung during the wait is the
root."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import BOOT, XID_79, role_of, syslog, verdicts_by_job, watchdog_timeout
from tests.test_node_naming import GLOBAL_OOM

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
599|599|eval|bob|FAILED|1:0|2026-11-20T07:00:00|2026-11-20T08:00:00|n8|gres/gpu=2,node=1
600|600|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[1-2]|gres/gpu=4,node=2
601|601|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[3-4]|gres/gpu=4,node=2
602|602|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[5-6]|gres/gpu=4,node=2
603|603|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[7-8]|gres/gpu=4,node=2
604|604|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[9-16]|gres/gpu=64,node=8
605|605|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[17-18]|gres/gpu=4,node=2
606|606|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[19-20]|gres/gpu=4,node=2
607|607|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[21-22]|gres/gpu=4,node=2
608|608|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[23-24]|gres/gpu=4,node=2
609|609|train|alice|CANCELLED by 1000|0:15|2026-11-20T10:00:00|2026-11-20T10:44:05|n[25-26]|gres/gpu=4,node=2
610|610|train|alice|CANCELLED by 1000|0:15|2026-11-20T10:00:00|2026-11-20T10:44:05|n[27-28]|gres/gpu=4,node=2
611|611|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[29-30]|gres/gpu=4,node=2
612|612|train|alice|TIMEOUT|0:0|2026-11-20T09:00:00|2026-11-20T12:40:05|n[31-32]|gres/gpu=4,node=2
613|613|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[33-34]|gres/gpu=4,node=2
614|614|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[35-36]|gres/gpu=4,node=2
615|615|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[37-38]|gres/gpu=4,node=2
616|616|train|alice|TIMEOUT|0:0|2026-11-20T09:00:00|2026-11-20T12:40:05|n[39-40]|gres/gpu=4,node=2
617|617|train|alice|TIMEOUT|0:0|2026-11-20T09:00:00|2026-11-20T10:45:05|n[41-42]|gres/gpu=4,node=2
618|618|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[43-44]|gres/gpu=4,node=2
619|619|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[45-46]|gres/gpu=4,node=2
620|620|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[47-48]|gres/gpu=4,node=2
621|621|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[49-50]|gres/gpu=4,node=2
622|622|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[51-52]|gres/gpu=4,node=2
623|623|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[53-54]|gres/gpu=4,node=2
624|624|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[55-56]|gres/gpu=4,node=2
625|625|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[57-58]|gres/gpu=4,node=2
626|626|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[59-60]|gres/gpu=4,node=2
627|627|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[61-62]|gres/gpu=4,node=2
628|628|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[63-64]|gres/gpu=4,node=2
629|629|train|alice|PREEMPTED|0:15|2026-11-20T10:00:00|2026-11-20T10:58:05|n[65-66]|gres/gpu=4,node=2
630|630|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[67-69]|gres/gpu=6,node=3
631|631|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[70-72]|gres/gpu=6,node=3
632|632|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[73-75]|gres/gpu=6,node=3
633|633|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[76-78]|gres/gpu=6,node=3
634|634|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[79-81]|gres/gpu=6,node=3
635|635|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[82-83]|gres/gpu=4,node=2
636|636|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[84-85]|gres/gpu=4,node=2
637|637|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[86-87]|gres/gpu=4,node=2
638|638|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[88-89]|gres/gpu=4,node=2
639|639|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[90-91]|gres/gpu=4,node=2
640|640|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[92-93]|gres/gpu=4,node=2
641|641|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[94-95]|gres/gpu=4,node=2
642|642|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[96-97]|gres/gpu=4,node=2
643|643|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[98-99]|gres/gpu=4,node=2
644|644|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[100-101]|gres/gpu=4,node=2
645|645|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[102-104]|gres/gpu=6,node=3
646|646|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[105-107]|gres/gpu=6,node=3
647|647|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[108-109]|gres/gpu=4,node=2
648|648|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[110-111]|gres/gpu=4,node=2
649|649|train|alice|NODE_FAIL|0:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[114-115]|gres/gpu=4,node=2
"""
# The kernel's CPU thermal throttle report since 5.5 (therm_throt.c, throttle_active_work()).
THROTTLED = "kernel: CPU47: Package temperature is above threshold, cpu clock is throttled (total events = 118)"
# The NFS client's report of a server that stopped answering (kangear/tiny210v2-uboot#5),
# printed once its major timeout ran out.
NFS_DOWN = "kernel: nfs: server 192.168.1.229 not responding, still trying"
# The kernel watchdog's report of a CPU stuck under a minute, as leptonai/gpud's matcher
# quotes it.
SOFT_LOCKUP = "kernel: watchdog: BUG: soft lockup - CPU#18 stuck for 27s! [python3:2254956]"
# The kernel's hung-task report (its format as pop-os/system76-power#179 shows it) of a
# training process blocked in the kernel.
HUNG = "kernel: INFO: task python3:47696 blocked for more than 122 seconds."
# PyTorch's heartbeat monitor and its stuck watchdog (the pack's comm.nccl_heartbeat_timeout
# and comm.nccl_watchdog_stuck lines: Intellindust-AI-Lab/DEIM#105), behind rank 2's label.
HEARTBEAT = ("2: [rank2]:[E1120 {clock}.102938000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Heartbeat monitor timed out! "
             "Process will be terminated after dumping debug info. workMetaList_.size()=1")
STUCK = ("2: [rank2]:[F1120 {clock}.204912000 ProcessGroupNCCL.cpp:1169] [PG 0 Rank 2] ProcessGroupNCCL's watchdog got "
         "stuck for 480 seconds without making progress in monitoring enqueued collectives.")
# A Lustre client's metadata request that got no timely answer (aws/aws-parallelcluster#2701).
SLOW_REPLY = ("kernel: Lustre: 3315:0:(client.c:2116:ptlrpc_expire_one_request()) @@@ Request sent has timed out for "
              "slow reply: [sent 1619790610/real 1619790610]  req@0000000052a0ed37 x1698193162592192/t0(0) "
              "o38->no2zxbmv-MDT0000-mdc-000000001785e248@10.0.47.232@tcp:12/10 lens 520/544 e 0 to 1")
# The watchdog line of older PyTorch, without a stamp (https://github.com/aioz-ai/GCD/issues/6).
# py-spy's dump of a process waiting for its DataLoader's next batch, as the BigScience
# 176B chronicles show it (bigscience-workshop/bigscience, tr11-176B-ml/chronicles.md).
PY_SPY_DUMP = (
    "Process 688514: /usr/bin/python3 -u pretrain_gpt.py", "Python v3.8.12 (/usr/bin/python3.8)", "",
    'Thread 688514 (idle): "MainThread"', "    wait (threading.py:306)", "    get (queue.py:179)",
    "    _try_get_data (torch/utils/data/dataloader.py:1011)", "    _get_data (torch/utils/data/dataloader.py:1163)",
    "    _next_data (torch/utils/data/dataloader.py:1207)", "    __next__ (torch/utils/data/dataloader.py:530)",
    "    train (megatron/training.py:904)",
)
# The same wait in a traceback's frames (pytorch/pytorch#131631).
TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 631, in __next__',
    "    data = self._next_data()",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1329, in _next_data',
    "    idx, data = self._get_data()",
)
# Python's faulthandler dump of every thread (dump_traceback_later), in the form of
# pytorch/pytorch#54818 and huggingface/transformers#5887: a rank whose main thread waits in
# its own metrics writer for a queue its writer thread cannot drain, and one waiting in a
# collective.
OWN_CODE_DUMP = (
    "Timeout (0:20:00)!", "Thread 0x00007f3c2a7fc700 (most recent call first):",
    '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
    '  File "/usr/lib/python3.10/queue.py", line 140 in put',
    '  File "/workspace/t5ft/metrics/async_writer.py", line 61 in _drain',
    '  File "/usr/lib/python3.10/threading.py", line 953 in run', "",
    "Current thread 0x00007f3d5c3f1740 (most recent call first):",
    '  File "/workspace/t5ft/metrics/async_writer.py", line 88 in flush',
    '  File "/workspace/train.py", line 402 in train_step',
    '  File "/workspace/train.py", line 530 in <module>',
)
COLLECTIVE_DUMP = (
    "Timeout (0:20:00)!", "Current thread 0x00007ff406132180 (most recent call first):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2477 in barrier',
    '  File "/workspace/train.py", line 402 in train_step',
)
OLD_TIMEOUT = ("{r}: [E ProcessGroupNCCL.cpp:737] [Rank {r}] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("straggler")
    logs = root / "logs"
    logs.mkdir()
    for job, ranks in (("600", (1, 2, 3)), ("601", (2, 3)), ("602", (1, 2, 3)), ("603", (0, 1, 3))):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in ranks))
    # 63 of 64 ranks, each having waited its own few milliseconds longer (as real ranks do,
    # so no two lines fold into one): more reports than the evidence keeps.
    (logs / "slurm-604.out").write_text("".join(
        watchdog_timeout(r, "10:40:00").replace("600099", str(600100 + r)) + "\n" for r in range(64) if r != 37))
    (logs / "n6.log").write_text(syslog("n6", ("10:29:00", f"kernel: {XID_79}")))
    # 599, that morning: n8, where 603's silent rank ran, lost a GPU under another job.
    (logs / "n8.log").write_text(syslog("n8", ("07:50:00", f"kernel: {XID_79}")))
    # Unstamped: the timeouts inherit the job's first stamp, five seconds after its start.
    (logs / "slurm-605.out").write_text("0: [2026-11-20 10:00:05,000] step 1\n"
                                        + "".join(OLD_TIMEOUT.format(r=r) + "\n" for r in (1, 2, 3)))
    # 606: both ranks of n20 never joined; n20's CPUs got stuck while the others waited.
    # 607: the same silent node, whose CPUs got stuck only after the first timeout.
    (logs / "slurm-606.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    (logs / "n20.log").write_text(syslog("n20", ("10:29:00", "kernel: ok"), ("10:31:10", SOFT_LOCKUP),
                                         ("10:33:30", SOFT_LOCKUP)))
    (logs / "slurm-607.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    (logs / "n22.log").write_text(syslog("n22", ("10:29:00", "kernel: ok"), ("10:40:30", SOFT_LOCKUP)))
    # 611: 606 again as PyTorch 2.x prints it: each timeout line follows the watchdog's
    # exception line of the same stamp, which names no timeout; n30's stalls repeat.
    exception = ("{r}: [rank{r}]:[E1120 10:40:00.755262105 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] "
                 "Exception (either an error or timeout) detected by watchdog at work: 3, last enqueued NCCL work: 3, "
                 "last completed NCCL work: 2.")
    (logs / "slurm-611.out").write_text("".join(exception.format(r=r) + "\n" + watchdog_timeout(r, "10:40:00") + "\n"
                                                for r in (0, 1)))
    (logs / "n30.log").write_text(syslog("n30", ("10:29:00", "kernel: ok"), *((f"10:{m}:10", SOFT_LOCKUP)
                                                                             for m in range(29, 36))))
    # 608: rank 0 writes a checkpoint to an NFS server that stopped answering at 10:30; the
    # clients report it when their major timeout runs out, three minutes later.
    (logs / "slurm-608.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (1, 2, 3)))
    for node in ("n23", "n24"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), ("10:33:00", NFS_DOWN)))
    # 609: 606 again, but n26 stayed hung after the others timed out, until the user
    # cancelled the job four minutes later. 610: the same cancellation with nothing else.
    cancel = "slurmstepd: error: *** JOB {job} ON {node} CANCELLED AT 2026-11-20T10:44:00 ***\n"
    (logs / "slurm-609.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1))
                                        + cancel.format(job=609, node="n25"))
    (logs / "n26.log").write_text(syslog("n26", ("10:29:00", "kernel: ok"), ("10:31:10", SOFT_LOCKUP)))
    (logs / "slurm-610.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1))
                                        + cancel.format(job=610, node="n27"))
    # 630: n68 and n69 both silent (ranks 2-5), their CPUs locked up while n67's ranks waited.
    (logs / "slurm-630.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    for node in ("n68", "n69"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), ("10:31:10", SOFT_LOCKUP)))
    # 631: n71 and n72 both silent while n70's ranks waited: n71's GPU fell off the bus at
    # 10:31:00, and n72's CPU, reported stuck for 27 s at 10:31:20, was stuck since 10:30:53.
    # 632: the same, but n75's CPU got stuck four minutes after n74's GPU fell off.
    for job, (timed_out, gpu, cpu), stuck in (("631", ("n70", "n71", "n72"), "10:31:20"),
                                               ("632", ("n73", "n74", "n75"), "10:35:20")):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
        (logs / f"{gpu}.log").write_text(syslog(gpu, ("10:29:00", "kernel: ok"), ("10:31:00", f"kernel: {XID_79}")))
        (logs / f"{cpu}.log").write_text(syslog(cpu, ("10:29:00", "kernel: ok"), (stuck, SOFT_LOCKUP)))
    # 645: one rank each of n103 and n104 never joined (their other ranks timed out):
    # n103's GPU fell off the bus at 10:31:00, n104's CPU was stuck since 10:30:53 under a
    # process. 646: only n106's rank never joined; n107, whose ranks all timed out,
    # reported its CPU stuck the same moment.
    for job, (timed_out, gpu, cpu), ranks in (("645", ("n102", "n103", "n104"), (0, 1, 2, 4)),
                                              ("646", ("n105", "n106", "n107"), (0, 1, 2, 4, 5))):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in ranks))
        (logs / f"{gpu}.log").write_text(syslog(gpu, ("10:29:00", "kernel: ok"), ("10:31:00", f"kernel: {XID_79}")))
        (logs / f"{cpu}.log").write_text(syslog(cpu, ("10:29:00", "kernel: ok"), ("10:31:20", SOFT_LOCKUP)))
    # 647: rank 2's watchdog (on n109) got stuck, its heartbeat monitor aborted it before any
    # collective timed out, and n109's kernel reported a task blocked since 10:31:58.
    # 648: the same without the kernel's report.
    for job, node, kernel in (("647", "n109", (("10:34:00", HUNG),)), ("648", "n111", ())):
        (logs / f"slurm-{job}.out").write_text(HEARTBEAT.format(clock="10:39:00") + "\n" + STUCK.format(clock="10:40:00") + "\n")
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), *kernel))
    # 649: n115's ranks never joined and its kernel reported a task blocked during the
    # wait; srun then said the node failed (salloc/srun's "Node failure on", nebius/soperator#854).
    (logs / "slurm-649.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1))
                                        + "srun: error: Node failure on n115\n")
    (logs / "n115.log").write_text(syslog("n115", ("10:29:00", "kernel: ok"), ("10:33:00", HUNG)))
    # 633: n77 and n78 both silent while n76's ranks waited: n77's CPU reported stuck for 27 s
    # at 10:31:20 (since 10:30:53), n78's training process blocked for 122 s at 10:33:00
    # (since 10:30:58). 634: the same, but n81's process was blocked from 10:33:58.
    for job, (timed_out, cpu, blocked), hung in (("633", ("n76", "n77", "n78"), "10:33:00"),
                                                 ("634", ("n79", "n80", "n81"), "10:36:00")):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
        (logs / f"{cpu}.log").write_text(syslog(cpu, ("10:29:00", "kernel: ok"), ("10:31:20", SOFT_LOCKUP)))
        (logs / f"{blocked}.log").write_text(syslog(blocked, ("10:29:00", "kernel: ok"), (hung, HUNG)))
    # 635: n83's ranks never joined; its log stopped before the collective began and its
    # kernel booted again nine minutes after the job ended. 636: an operator rebooted n85
    # two hours after.
    for job, (waiting, silent), boot in (("635", ("n82", "n83"), "10:50:00"), ("636", ("n84", "n85"), "12:41:00")):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
        (logs / f"{silent}.log").write_text(syslog(silent, ("10:29:00", "kernel: ok"), (boot, f"kernel: {BOOT}")))
    # 637: n87's ranks never joined; its GPU fell off the bus, stamped six minutes after the
    # collective began (its clock, or its kernel's word, late).
    (logs / "slurm-637.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    (logs / "n86.log").write_text(syslog("n86", ("10:29:00", "kernel: ok"), ("10:39:00", "kernel: ok")))
    (logs / "n87.log").write_text(syslog("n87", ("10:29:00", "kernel: ok"), ("10:36:00", f"kernel: {XID_79}")))
    # 638: n89's ranks never joined; the kernel's OOM killer killed one of its processes 70 s
    # after the collective began (the node thrashing in reclaim until then). 639: the same
    # kill, on n90, whose ranks did time out with the others.
    for job, (waiting, silent), oom_node in (("638", ("n88", "n89"), "n89"), ("639", ("n90", "n91"), "n90")):
        ranks = (0, 1) if job == "638" else (0, 1, 2, 3)
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in ranks))
        for node in (waiting, silent):
            kill = [("10:31:10", f"kernel: {line}") for line in GLOBAL_OOM] if node == oom_node else []
            (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), *kill))
    # 629: 610's hang, ended by a preemption eighteen minutes after the watchdog fired.
    (logs / "slurm-629.out").write_text(
        "".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1))
        + "slurmstepd: error: *** JOB 629 ON n65 CANCELLED AT 2026-11-20T10:58:00 DUE TO PREEMPTION ***\n")
    # 612: TORCH_NCCL_ASYNC_ERROR_HANDLING=0: ranks 1-3 timed out at 10:40 and kept
    # waiting; the time limit ended the job two hours later.
    limit = "slurmstepd: error: *** JOB 612 ON n31 CANCELLED AT 2026-11-20T12:40:00 DUE TO TIME LIMIT ***\n"
    (logs / "slurm-612.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (1, 2, 3)) + limit)
    # 616: 612 with rank 2 silent (no rank 0 work to blame); 617: the limit came five
    # minutes after the timeouts, too soon to say the job would not have finished.
    for job, node, end in (("616", "n39", "12:40:00"), ("617", "n41", "10:45:00")):
        (logs / f"slurm-{job}.out").write_text(
            "".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1, 3))
            + limit.replace("612", job).replace("n31", node).replace("12:40:00", end))
    # 613: rank 0's monitored barrier (ProcessGroupGloo.cpp) names rank 3, which never came.
    (logs / "slurm-613.out").write_text(
        "0: [rank0]:[E1120 10:40:00.402111 1213 ProcessGroupGloo.cpp:2889] [Rank 0]: Rank 3 failed to pass "
        "monitoredBarrier in 1800000 ms\n")
    # 614: every rank timed out; n36's kernel reported its training process blocked while
    # the others waited (a node thrashing). 615: both nodes did: nothing singles one out.
    (logs / "slurm-614.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in range(4)))
    (logs / "n36.log").write_text(syslog("n36", ("10:29:00", "kernel: ok"), ("10:33:00", HUNG)))
    (logs / "slurm-615.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in range(4)))
    for node in ("n37", "n38"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), ("10:33:00", HUNG)))
    # 640: every rank timed out; n93's CPUs got stuck while they waited, no other node's.
    # 641: rank 0 (on n94) never joined, and n94's CPUs got stuck while the others waited.
    for job, ranks, node in (("640", range(4), "n93"), ("641", (1, 2, 3), "n94")):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in ranks))
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), ("10:31:10", SOFT_LOCKUP),
                                                 ("10:33:30", SOFT_LOCKUP)))
    # 618: n44's ranks never joined; its CPUs were throttled from before the collective
    # began into the wait (one report, repeated). 619: n46's kernel reported its data
    # loader blocked during the wait. 620: n48's CPUs were throttled only in the morning.
    for job in ("618", "619", "620"):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    (logs / "n44.log").write_text(syslog("n44", ("10:25:00", THROTTLED), ("10:33:00", THROTTLED), ("10:36:00", THROTTLED)))
    (logs / "n46.log").write_text(syslog("n46", ("10:29:00", "kernel: ok"), ("10:34:00", HUNG)))
    (logs / "n48.log").write_text(syslog("n48", ("08:00:00", THROTTLED), ("10:29:00", "kernel: ok")))
    # 621: GPFS expelled n50 (its daemon's messages as scitix/sichek's test mmfs.log has
    # them, under syslog's header with the daemon's "mmfs" tag); its ranks never came back
    # from their reads.
    (logs / "slurm-621.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1)))
    (logs / "n50.log").write_text(syslog(
        "n50", ("10:29:00", "kernel: ok"),
        ("10:31:02", "mmfs[3389]: [E] VERBS RDMA closed connection to 10.191.1.2 (dss02) on mlx5_0 port 1 fabnum 0 "
                     "index 387 cookie 5280 RDMA send error IBV_WC_RETRY_EXC_ERR"),
        ("10:31:33", "mmfs[3374]: [N] This node will be expelled from cluster gpfscluster.gpfs due to expel msg "
                     "from 10.192.1.1"),
        ("10:31:35", "mmfs[4919]: [E] Lost membership in cluster gpfscluster.gpfs. Unmounting file systems.")))
    # 622: rank 3 (n52's second task) never joined; once the others had timed out, a py-spy
    # dump of n52 showed a process waiting for its DataLoader (py-spy stamps nothing: the
    # dump inherits the last progress line's stamp, from before the collective began). 623: rank 1 never joined,
    # and the dump came from n53, whose ranks all timed out. 624: the dump of n56, silent
    # rank 3's node, was taken before the collective began (a stamped NCCL warning follows it: NCCL
    # 2.23's NCCL_DEBUG_TIMESTAMP_FORMAT prefix, net_ib.cc's "Got async event" with
    # libibverbs' name of IBV_EVENT_GID_CHANGE). 625: 622 with the traceback of
    # rank 2 (whose own timeout is in the file) and of rank 0, the silent one.
    # 626: a silent rank 0 whose dump shows the same wait, while its node's CPUs were
    # throttled by heat (a slowdown does not leave a DataLoader empty for ten minutes).
    def dump(task: int, lines: tuple[str, ...]) -> str:
        return "".join(f"{task}: {line}\n" for line in lines)

    (logs / "slurm-622.out").write_text("3: [2026-11-20 10:29:57,000] step 9\n" + dump(3, PY_SPY_DUMP)
                                        + "".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1, 2)))
    (logs / "slurm-623.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 2, 3))
                                        + dump(0, PY_SPY_DUMP))
    (logs / "slurm-624.out").write_text("3: [2026-11-20 10:20:00,000] step 1\n" + dump(3, PY_SPY_DUMP)
                                        + "3: [2026-11-20 10:25:00] n56:7102:7102 [1] transport/net_ib.cc:1412 NCCL WARN "
                                          "NET/IB : Got async event : GID table change\n"
                                        + "".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1, 2)))
    (logs / "slurm-625.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (1, 2, 3))
                                        + dump(2, ("[rank2]:" + line for line in TRACEBACK))
                                        + dump(0, ("[rank0]:" + line for line in TRACEBACK)))
    (logs / "slurm-626.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (1, 2, 3))
                                        + dump(0, PY_SPY_DUMP))
    # 642: rank 3 (n97's second task) never joined; its faulthandler dump, printed after the
    # collective began, shows it in the job's own code. 643: its dump shows it in a
    # collective. 644: the own-code dump is rank 2's, which timed out like the others.
    for job, task, lines in (("642", 3, OWN_CODE_DUMP), ("643", 3, COLLECTIVE_DUMP), ("644", 2, OWN_CODE_DUMP)):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (0, 1, 2))
                                            + f"{task}: [2026-11-20 10:30:30,000] step 9\n" + dump(task, lines))
    # 627: rank 0 silent while both nodes' Lustre clients timed out on the metadata target
    # (rank 0 writing a checkpoint on a stalled filesystem); 628: only the silent node's did.
    for job, nodes in (("627", ("n61", "n62")), ("628", ("n63",))):
        (logs / f"slurm-{job}.out").write_text("".join(watchdog_timeout(r, "10:40:00") + "\n" for r in (1, 2, 3)))
        for node in nodes:
            (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok"), ("10:31:30", SLOW_REPLY)))
    for node in ("n43", "n45", "n47", "n49", *(f"n{i}" for i in range(51, 61)), "n64", "n65", "n66", "n67",
                 *(f"n{i}" for i in range(96, 102))):
        (logs / f"{node}.log").write_text(syslog(node, ("10:29:00", "kernel: ok")))
    (logs / "n59.log").write_text(syslog("n59", ("10:29:00", "kernel: ok"), ("10:33:00", THROTTLED)))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20), year=2026)


def test_the_one_rank_without_a_timeout_is_the_straggler(verdicts):
    v = verdicts["600"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.straggler_rank", "probable")
    assert (v["culprit_ranks"], v["culprit_nodes"]) == ([0], [])  # the job's own: no node to take out
    assert [e["node"] for e in v["evidence"] if e["rule_id"] == "straggler_rank"] == ["n1"]
    # The collective began a timeout before the first watchdog line.
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:30:00.755262+00:00"


def test_another_silent_rank_is_named_but_not_blamed(verdicts):
    """Rank 2 may sit on a hung or fail-slow GPU as well as in slow code: symptoms only."""
    v = verdicts["603"]
    assert (v["cause"], v["quality"], v["culprit_nodes"]) == ("unknown.symptoms_only", "insufficient", [])
    named = [e for e in v["evidence"] if e["rule_id"] == "straggler_rank"]
    assert [(e["node"], e["rank"], e["role"]) for e in named] == [("n8", 2, "context")]


def test_a_silent_node_blamed_before_by_another_job_is_noted_as_the_suspect(verdicts):
    """The fleet view: the node 603's other ranks waited for lost a GPU under job 599 that
    morning. The verdict stays what 603's own logs make it; the note says where to look."""
    assert (verdicts["599"]["domain"], verdicts["599"]["culprit_nodes"]) == ("gpu", ["n8"])
    v = verdicts["603"]
    assert (v["cause"], v["quality"], v["culprit_nodes"]) == ("unknown.symptoms_only", "insufficient", [])
    notes = [e for e in v["evidence"] if e["rule_id"] == "fleet.silent_suspect"]
    assert [(e["node"], e["source"]) for e in notes] == [("n8", "fleet")]
    assert "infrastructure failures of 1 other job(s)" in notes[0]["message"]
    assert "gpu.fallen_off_bus" in notes[0]["message"]
    # n13, 604's silent node, was never blamed: no note.
    assert not any(e["rule_id"] == "fleet.silent_suspect" for e in verdicts["604"]["evidence"])


def test_two_silent_ranks_name_no_straggler(verdicts):
    assert verdicts["601"]["cause"] == "unknown.symptoms_only"


def test_a_fault_line_outranks_the_inference(verdicts):
    assert (verdicts["602"]["domain"], verdicts["602"]["culprit_nodes"]) == ("gpu", ["n6"])


def test_the_silent_rank_is_kept_when_the_timeouts_fill_the_evidence(verdicts):
    v = verdicts["604"]
    assert len(v["evidence"]) == 50  # the default evidence_limit: most of the 63 reports are left out
    named = [e for e in v["evidence"] if e["rule_id"] == "straggler_rank"]
    assert [(e["node"], e["rank"], e["role"]) for e in named] == [("n13", 37, "context")]


def test_a_collective_inferred_before_the_start_began_at_the_start(verdicts):
    v = verdicts["605"]
    assert (v["cause"], v["culprit_ranks"]) == ("workload.straggler_rank", [0])
    assert v["first_fault_ts"].isoformat() == "2026-11-20T10:00:00+00:00"


def test_a_silent_node_whose_cpus_got_stuck_while_the_others_waited_is_the_root(verdicts):
    v = verdicts["606"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_stall", ["n20"])
    assert v["quality"] == "probable"  # an inference from what is missing: never definitive
    named = [e for e in v["evidence"] if e["rule_id"] == "straggler_rank"]
    assert [(e["node"], e["rank"], e["role"]) for e in named] == [("n20", None, "context")]


def test_the_wait_is_read_from_the_timeout_line_not_the_exception_line_beside_it(verdicts):
    """The watchdog's exception line, stamped with its timeout line, names no timeout: the
    collective still began ten minutes before, and the stalls then are the root."""
    v = verdicts["611"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_stall", ["n30"])


def test_a_cancellation_of_a_job_already_stuck_is_not_its_root(verdicts):
    """The user cancelled the job after its collective had hung (the watchdog timed out
    before the banner): the stalled node stays the root, and with nothing else the
    scheduler's record is the fallback."""
    v = verdicts["609"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_stall", ["n26"])
    assert role_of(v, "scheduler.slurm_cancelled_by_user") == "context"
    alone = verdicts["610"]
    assert (alone["domain"], alone["cause"], alone["quality"]) == ("scheduler", "scheduler.cancelled", "insufficient")


def test_cpu_stalls_after_the_first_timeout_stay_context(verdicts):
    v = verdicts["607"]
    assert (v["cause"], v["culprit_nodes"]) == ("unknown.symptoms_only", [])
    assert [e["node"] for e in v["evidence"] if e["rule_id"] == "straggler_rank"] == ["n22"]


def test_a_filesystem_reported_lost_after_its_timeout_is_the_hangs_root(verdicts):
    """The clients report the server minutes after the checkpoint write hung: not a fault
    that came too late to have hung the job, and not rank 0's own code."""
    v = verdicts["608"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", [])


def test_a_filesystem_every_client_saw_stall_while_the_others_waited_is_the_hangs_root(verdicts):
    """Rank 0 waited on the filesystem, as both nodes' clients say: the metadata target's,
    on no node; the silent rank is only named."""
    v = verdicts["627"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.lustre_error", [])
    assert role_of(v, "straggler_rank") == "context"


def test_a_slow_reply_on_the_silent_node_alone_leaves_the_straggler(verdicts):
    """One client's slow reply is the load of a busy filesystem as often as a stall."""
    v = verdicts["628"]
    assert (v["domain"], v["cause"], v["culprit_ranks"]) == ("workload", "workload.straggler_rank", [0])


def test_two_silent_nodes_whose_cpus_locked_up_while_the_others_waited_are_the_root(verdicts):
    v = verdicts["630"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_stall", ["n68", "n69"])


def test_a_silent_nodes_cpu_stuck_when_another_silent_nodes_gpu_fell_off_is_a_rival(verdicts):
    """Both nodes the others waited for reported a fault: the GPU that fell off first by
    the stamps, but the CPU reported stuck 20 s later had been stuck since before it. No
    clock orders the two; the verdict weighs both."""
    v = verdicts["631"]
    assert (v["domain"], v["culprit_nodes"], v["quality"]) == ("gpu", ["n71", "n72"], "ambiguous")
    assert [a["cause"] for a in v["alternatives"]] == ["host.cpu_stall"]


def test_a_cpu_stuck_under_one_of_two_silent_ranks_when_the_others_gpu_fell_off_is_a_rival(verdicts):
    """A rank each of two nodes never joined: one node's GPU fell off the bus, the other's
    CPU was stuck since a moment before. Either explains the hang; a CPU stuck on a node
    all of whose ranks timed out waited with them, and is no rival."""
    v = verdicts["645"]
    assert (v["domain"], v["culprit_nodes"], v["quality"]) == ("gpu", ["n103", "n104"], "ambiguous")
    assert [a["cause"] for a in v["alternatives"]] == ["host.cpu_stall"]
    v = verdicts["646"]
    assert (v["domain"], v["culprit_nodes"], v["alternatives"]) == ("gpu", ["n106"], [])
    assert role_of(v, "host.soft_lockup") == "context"


def test_a_task_blocked_on_the_node_whose_watchdog_alone_got_stuck_is_the_root(verdicts):
    """No collective timed out: rank 2's own watchdog got stuck under a hung NCCL or CUDA
    call, and its node's kernel reported a task blocked meanwhile: one fault, that node's.
    Without the kernel's word the stuck watchdog names nothing."""
    v = verdicts["647"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.hung_task", ["n109"])
    v = verdicts["648"]
    assert (v["cause"], v["culprit_nodes"], v["quality"]) == ("unknown.symptoms_only", [], "insufficient")


def test_a_silent_nodes_blocked_task_says_more_than_its_later_node_failure(verdicts):
    """srun's "Node failure on n115" says the node stopped answering, not why; its kernel's
    task blocked while the others waited does, on the same node."""
    v = verdicts["649"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.hung_task", ["n115"])


def test_a_silent_nodes_cpu_stuck_minutes_after_the_gpu_fell_off_is_no_rival(verdicts):
    v = verdicts["632"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["n74"])
    assert v["quality"] != "ambiguous"


def test_a_task_reported_blocked_since_another_silent_nodes_cpu_got_stuck_is_a_second_culprit(verdicts):
    """The hung-task report says how long the task had not run: n78's process was blocked
    from five seconds after n77's CPU got stuck, as good as the same moment. Both nodes
    stalled; the job waited for either."""
    v = verdicts["633"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.cpu_stall", ["n77", "n78"])
    assert (v["quality"], v["alternatives"]) == ("probable", [])


def test_an_oom_kill_on_the_node_the_others_waited_for_is_the_root_however_late(verdicts):
    """Its ranks stalled in reclaim before the kernel killed one: the kill, stamped 70 s
    into the wait, is why they never joined; its stamp does not say it came first."""
    v = verdicts["638"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.oom_killer", ["n89"])
    assert v["quality"] != "definitive"


def test_an_oom_kill_on_a_node_whose_ranks_timed_out_late_in_the_wait_is_context(verdicts):
    v = verdicts["639"]
    assert v["cause"] != "host.oom_killer" and role_of(v, "host.oom_killed_process") == "context"


def test_a_task_blocked_minutes_after_another_silent_nodes_cpu_got_stuck_is_not_named(verdicts):
    v = verdicts["634"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("host", "host.cpu_stall", ["n80"], "probable")


def test_a_silent_node_that_booted_again_soon_after_went_down(verdicts):
    v = verdicts["635"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("host", "host.node_failure", ["n83"], "probable")
    assert role_of(v, "straggler_rank") == "context"
    # It went down when the collective it never joined began, a timeout before the first report.
    assert v["first_fault_ts"].isoformat().startswith("2026-11-20T10:30:00")


def test_a_silent_node_rebooted_hours_later_is_only_named(verdicts):
    v = verdicts["636"]
    assert (v["cause"], v["quality"], v["culprit_nodes"]) == ("unknown.symptoms_only", "insufficient", [])
    assert role_of(v, "straggler_rank") == "context"


def test_a_gpu_lost_on_the_silent_node_stamped_after_the_hang_began_is_the_root_but_not_definitive(verdicts):
    """The silent node's GPU is why the others waited, whatever its stamp says; but the
    stamp does not say it came first."""
    v = verdicts["637"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("gpu", "gpu.fallen_off_bus", ["n87"], "probable")


def test_a_preemption_long_after_the_hang_only_stopped_the_job(verdicts):
    """The job had hung eighteen minutes before the scheduler preempted it: the preemption
    is no root, and nothing else says what hung it."""
    v = verdicts["629"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert role_of(v, "scheduler.slurm_cancelled_due_to") == "context"


def test_a_time_limit_long_after_the_hang_only_stopped_the_job(verdicts):
    v = verdicts["612"]
    assert (v["domain"], v["cause"], v["culprit_ranks"]) == ("workload", "workload.straggler_rank", [0])
    assert role_of(v, "scheduler.slurm_cancelled_due_to") == "context"


def test_a_time_limit_long_after_a_hang_no_rank_explains_is_no_root(verdicts):
    """Nothing explains 616's hang but rank 2 on n40, which never joined: the time limit two
    hours later is no root (more time would not have helped), the verdict is symptoms only
    with the rank named. 617's limit five minutes after the timeouts stays the fallback."""
    v = verdicts["616"]
    assert (v["domain"], v["cause"], v["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert v["recommended_action"] != "increase_time_limit"
    assert [(e["node"], e["rank"]) for e in v["evidence"] if e["rule_id"] == "straggler_rank"] == [("n40", 2)]
    assert role_of(v, "scheduler.slurm_cancelled_due_to") == "context"
    assert verdicts["617"]["cause"] == "scheduler.time_limit"


def test_a_silent_node_throttled_or_blocked_while_the_others_waited_is_the_root(verdicts):
    """What the silent node's kernel said during the wait is why it never came; a throttle
    that ended hours before says nothing of this wait."""
    for job, node, cause in (("618", "n44", "host.cpu_thermal_throttle"), ("619", "n46", "host.hung_task")):
        v = verdicts[job]
        assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("host", cause, [node], "probable")
    assert (verdicts["620"]["cause"], verdicts["620"]["culprit_nodes"]) == ("unknown.symptoms_only", [])


def test_a_node_gpfs_expelled_while_the_others_waited_is_the_root(verdicts):
    v = verdicts["621"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.filesystem_unavailable", ["n50"])
    assert role_of(v, "storage.gpfs_link_error") == "context"


def test_the_silent_ranks_stack_waiting_for_its_data_loader_is_the_root(verdicts):
    """The one rank the others waited for was waiting for its DataLoader's next batch: the
    job's data pipeline hung, no node to take out."""
    for job, node, rank in (("622", "n52", 3), ("625", "n57", 0), ("626", "n59", 0)):
        v = verdicts[job]
        assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.data_loader_stall", "probable"), job
        assert (v["culprit_nodes"], v["culprit_ranks"]) == ([], [rank]), job
        roots = [e for e in v["evidence"] if e["role"] == "root_candidate"]
        assert [(e["rule_id"], e["node"]) for e in roots] == [("framework.stack_in_data_loader", node)], job
        assert role_of(v, "straggler_rank") == "context", job


def test_a_data_loader_stack_not_of_the_silent_rank_explains_nothing(verdicts):
    """A dump of a node whose ranks all timed out, one taken before the collective began,
    and a traceback naming a rank that did time out say nothing of why the silent rank
    never came."""
    for job in ("623", "624"):
        v = verdicts[job]
        assert (v["cause"], v["quality"]) == ("unknown.symptoms_only", "insufficient"), job
        assert role_of(v, "framework.stack_in_data_loader") == "context", job
    waits = [(e["rank"], e["role"]) for e in verdicts["625"]["evidence"] if e["rule_id"] == "framework.stack_in_data_loader"]
    assert sorted(waits) == [(0, "root_candidate"), (2, "context")]


def test_the_silent_ranks_stack_in_its_own_code_is_the_root(verdicts):
    """The one rank the others waited for was in none of PyTorch's code, but in the job's
    own (its metrics writer deadlocked): the job's straggler, no node to take out."""
    v = verdicts["642"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.straggler_rank", "probable")
    assert (v["culprit_nodes"], v["culprit_ranks"]) == ([], [3])


def test_a_silent_rank_in_a_collective_or_another_ranks_own_code_explains_nothing(verdicts):
    for job in ("643", "644"):
        v = verdicts[job]
        assert (v["cause"], v["quality"]) == ("unknown.symptoms_only", "insufficient"), job


def test_the_monitored_barrier_names_the_rank_that_never_came(verdicts):
    v = verdicts["613"]
    named = [e for e in v["evidence"] if e["rule_id"] == "comm.monitored_barrier_missed"]
    assert [(e["node"], e["rank"]) for e in named] == [(None, 3)]


def test_the_one_node_whose_tasks_hung_while_every_rank_waited_is_the_root(verdicts):
    v = verdicts["614"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("host", "host.hung_task", ["n36"])
    assert v["quality"] == "probable"  # nothing links the timeouts to it


def test_the_one_node_whose_cpus_stalled_while_every_rank_waited_is_the_root(verdicts):
    """As a task blocked for minutes does: the CPUs of n93 stuck during the wait, no other
    node's, made it the collective's slowest."""
    v = verdicts["640"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("host", "host.cpu_stall", ["n93"], "probable")


def test_a_silent_rank_zeros_node_stalled_in_its_kernel_is_the_root_not_its_own_work(verdicts):
    v = verdicts["641"]
    assert (v["domain"], v["cause"], v["culprit_nodes"], v["quality"]) == ("host", "host.cpu_stall", ["n94"], "probable")
    assert role_of(v, "straggler_rank") == "context"


def test_tasks_hung_on_every_node_single_none_out(verdicts):
    v = verdicts["615"]
    assert (v["cause"], v["culprit_nodes"]) == ("unknown.symptoms_only", [])

