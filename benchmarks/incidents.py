"""The real incidents of the shared corpus: what each thread concluded, and how causelake's
one-shot diagnosis scores on them (used by the accuracy benchmark and the tests).

``incidents.jsonl`` holds multi-line failure cascades copied from public threads, in their
original order, with the thread's conclusion. Where the thread reached a conclusion *and*
the copied lines carry the evidence for it, the verdict's domain must match
(:data:`EXPECTED`). Where the thread is open, or its conclusion rests on something the lines
do not show, the verdict must be honest: ``insufficient``, ``ambiguous`` or ``probable``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from engine.oneshot import diagnose
from engine.run import landing_lake

CORPUS_DIR = Path(os.environ.get("CAUSELAKE_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
"""The shared corpus: ``$CAUSELAKE_CORPUS``, else ``shared/corpus`` beside the repository."""

INCIDENTS = CORPUS_DIR / "incidents.jsonl"

EXPECTED: dict[str, tuple[str | None, str]] = {
    # source → (domain the lines support, or None: only an honest quality is checked; why)
    "https://github.com/olcf/olcf-test-harness/issues/254": (
        None, "node failure per the thread, but the lines are sacct rows (RESIZING, TIMEOUT): "
        "no line names the failed node"),
    "https://github.com/huggingface/accelerate/issues/1192": (
        "gpu_memory", "uncorrectable ECC error reported by CUDA; the SIGTERMs are the launcher's teardown"),
    "https://github.com/ovro-lwa/lwa-issues/issues/117": (
        "host", "EDAC uncorrectable CPU memory error and machine check on the crashed server"),
    "https://github.com/open-mmlab/mmsegmentation/issues/3106": (
        None, "open issue: a ChildFailedError summary of SIGABRTs carries no cause"),
    "https://github.com/Intellindust-AI-Lab/DEIM/issues/105": (
        None, "open issue: heartbeat timeouts only (rank 0 probably stalled outside NCCL)"),
    "https://github.com/MLI-lab/DeepDeWedge/issues/22": (
        None, "weak resolution (went away on other hardware); watchdog timeouts only"),
    "https://github.com/NVIDIA/nccl/issues/2213": (
        "workload", "SIGSEGV inside NCCL on one rank; the other rank's watchdog timeout follows"),
    "https://github.com/desihub/desitarget/issues/628": (
        "scheduler", "DUE TO TIME LIMIT (default QOS limit); srun's Terminated lines follow"),
    "https://github.com/hiyouga/LlamaFactory/issues/6953": (
        None, "launch skew per the thread; the lines are heartbeat timeouts only"),
    "https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md": (
        None, "fail-slow GPU / DataLoader deadlock: no error line at all, only progress and pulses"),
    "https://github.com/aioz-ai/GCD/issues/6": (
        None, "unresolved: three ranks time out while rank 0 is silent"),
    "https://github.com/hafs-community/HAFS/issues/101": (
        "host", "cgroup OOM kill in the step; srun's Out Of Memory and the step cancel follow"),
    "https://github.com/NVIDIA/nccl/issues/795": (
        None, "a remote rank crashed per the thread; the lines are the peers' socket errors"),
    "https://github.com/IGNF/myria3d/issues/123": (
        None, "rank 0's slow data preparation per the thread; only a progress bar and the "
        "other ranks' watchdog timeouts are in the lines"),
}
"""Incident source → expected verdict domain (None: no conclusion the lines can support)."""

HONEST = ("insufficient", "ambiguous", "probable")
"""Qualities that admit doubt: what a verdict without a supportable conclusion must have."""


def load_incidents(path: Path = INCIDENTS) -> list[dict]:
    """The incidents, one dict per line of ``incidents.jsonl``."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def diagnose_incident(item: dict, workdir: Path) -> dict:
    """The verdict one-shot diagnosis gives an incident's lines (written to a log file)."""
    log = workdir / "incident.log"
    log.write_text("\n".join(item["lines"]) + "\n")
    _, summary = diagnose(landing_lake(workdir / "lake"), [log])
    return summary.verdicts.row(0, named=True)


def score_incidents(path: Path = INCIDENTS) -> dict:
    """Diagnose every incident: domain accuracy on the concluded ones, honesty on the rest."""
    rows = []
    for item in load_incidents(path):
        expected, reason = EXPECTED.get(item["source"], (None, "not in the table"))
        with tempfile.TemporaryDirectory() as tmp:
            try:
                verdict = diagnose_incident(item, Path(tmp))
                got, quality = verdict["domain"], verdict["quality"]
            except Exception as exc:  # a crash on a real incident is a result to report, not to hide
                got, quality = f"error: {type(exc).__name__}: {exc}"[:200], None
        ok = got == expected if expected else quality in HONEST
        rows.append({"source": item["source"], "expected": expected, "got": got, "quality": quality,
                     "ok": ok, "why": reason})
    concluded = [r for r in rows if r["expected"]]
    open_ = [r for r in rows if not r["expected"]]
    return {
        "incidents": len(rows),
        "concluded": len(concluded),
        "domain_accuracy": sum(r["ok"] for r in concluded) / len(concluded) if concluded else None,
        "honest_on_open": sum(r["ok"] for r in open_) / len(open_) if open_ else None,
        "detail": rows,
    }
