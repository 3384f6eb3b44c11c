"""Attribute a small hand-written case the way a user would: a saved ``sacct --parsable2``
dump through the Slurm connector, a folder of logs through the files landing, one run; and
the real lines several such cases share."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

from engine.run import landing_lake, run_attribution
from ingest.connectors import run_connector
from ingest.connectors.base import Connector
from ingest.connectors.slurm import SlurmConnector, SlurmOptions
from ingest.files import land_log_files


def verdicts_by_job(
    root: Path, sacct: str, logs: Path, day: date, more: tuple[tuple[Path, dict], ...] = (),
    connectors: tuple[Connector, ...] = (), **land_options,
) -> dict[str, dict]:
    """Land ``sacct`` (the dump's text, UTC) and every file under ``logs`` into a lake
    under ``root`` (cluster ``c1``), attribute ``day``, and return the verdicts by job id
    (a requeued job's last attempt). ``land_options`` go to
    :func:`ingest.files.land_log_files` (``year=``…); each of ``more`` is a further path
    landed with its own options (a controller's log with ``node=``); ``connectors`` run too
    (a topology file's)."""
    rows = verdicts_by_attempt(root, sacct, logs, day, more, connectors, **land_options).values()
    return {row["job_id"]: row for row in rows}


def verdicts_by_attempt(
    root: Path, sacct: str, logs: Path, day: date, more: tuple[tuple[Path, dict], ...] = (),
    connectors: tuple[Connector, ...] = (), **land_options,
) -> dict[str, dict]:
    """:func:`verdicts_by_job`, by attempt id (every attempt of a requeued job)."""
    (root / "sacct.txt").write_text(sacct)
    lake = landing_lake(root / "lake")
    for connector in (SlurmConnector(SlurmOptions(sacct_file=[root / "sacct.txt"], timezone="UTC"), "c1"), *connectors):
        report = run_connector(lake, connector, None)
        assert report.error is None, report.error
    land_log_files(lake, [logs], cluster="c1", **land_options)
    for path, options in more:
        land_log_files(lake, [path], cluster="c1", **options)
    return {row["attempt_id"]: row for row in run_attribution(lake, day, day).verdicts.to_dicts()}


def role_of(verdict: dict, rule_id: str) -> str:
    """The role of the first evidence event of rule ``rule_id`` in a verdict."""
    return next(e["role"] for e in verdict["evidence"] if e["rule_id"] == rule_id)


# https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md
ITERATION = "iteration   42784/ 115311 | consumed samples:    71463856 | elapsed time per iteration (s): 111.14"
# https://github.com/lllyasviel/FramePack/issues/369
CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 29.76 GiB"
# https://github.com/ymoslem/OpenNMT-Tutorial/issues/6 (a cgroup's memory limit)
CGROUP_OOM = ("Memory cgroup out of memory: Killed process 629 (onmt_train) total-vm:14119556kB, "
              "anon-rss:6538204kB, file-rss:80652kB, shmem-rss:16kB, UID:0 pgtables:13432kB oom_score_adj:0")
# https://github.com/velvet-os/imagebuilder/issues/36 (the kernel's first line of a boot)
BOOT = ("[    0.000000] Linux version 5.15.22-stb-mt8+ (root@aarch64) (gcc (Debian 10.2.1-6) 10.2.1 20210110, "
        "GNU ld (GNU Binutils for Debian) 2.35.2) #5 SMP PREEMPT Tue Feb 22 21:52:33 CET 2022")
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID_79 = "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."
# https://github.com/mempodippy/vlany/issues/28 (an ordinary daemon line: the node is alive)
ALIVE = "systemd[1]: Started Session c2 of user root."


def watchdog_timeout(rank: int, clock: str) -> str:
    """PyTorch's NCCL watchdog line of ``rank`` behind its ``srun --label`` task id, stamped
    ``clock`` (HH:MM:SS) on 2026-11-20, as hiyouga/LlamaFactory#6269 shows it: the collective
    timed out after 600 s, so it began ten minutes before ``clock``."""
    return (f"{rank}: [rank{rank}]:[E1120 {clock}.755262105 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600099 milliseconds before timing out.")


def syslog(node: str, *lines: tuple[str, str]) -> str:
    """rsyslog ISO lines of ``node`` on 2026-11-20: one per ``(HH:MM:SS, message)``."""
    return "".join(f"2026-11-20T{clock}.000000+00:00 {node} {message}\n" for clock, message in lines)


# Megatron-LM's iteration report (bigscience-workshop/bigscience, tr11-176B-ml/chronicles.md),
# behind srun --label and Megatron's own stamp: a progress report (a step and its loss).
LOSS_ITERATION = ("{task}: [2026-11-20 {clock}] iteration {n:>8}/  500000 | consumed samples: {samples:>12} | elapsed "
                  "time per iteration (ms): 1861.8 | learning rate: 2.998E-04 | global batch size:  1024 | lm loss: "
                  "2.905654E+00 |")


def progress(until: str, every_minutes: int = 5, since: str = "08:05") -> str:
    """Rank 0's iteration reports (:data:`LOSS_ITERATION`) on 2026-11-20, every
    ``every_minutes`` from ``since`` up to ``until`` (HH:MM)."""
    stop = datetime.strptime(until, "%H:%M")
    moment, lines, n = datetime.strptime(since, "%H:%M"), [], 0
    while moment <= stop:
        n += 163
        lines.append(LOSS_ITERATION.format(task=0, clock=moment.strftime("%H:%M:%S"), n=n, samples=n * 1024) + "\n")
        moment += timedelta(minutes=every_minutes)
    return "".join(lines)
