"""Every real corpus line through the whole bundled rule pack.

The corpus (``real_lines.jsonl``: verbatim lines, each with its source URL, a domain label and
``root_cause_or_symptom``) is read from ``$CAUSELAKE_CORPUS`` or ``shared/corpus`` beside the
repository. For each line the bundled pack must say what the label says:

* ``root_cause`` → an event of the mapped domain (:data:`LABEL_DOMAINS`, or
  :data:`DOMAIN_OVERRIDES` where the design names another domain) whose role is
  ``root_candidate`` or ``confirmation``;
* ``symptom`` → an event with role ``cascade`` (or the role listed in
  :data:`NOT_A_CASCADE`, where a symptom is deliberately modelled otherwise);
* ``either`` → the pack recognises the line: some event, benign included (progress lines and
  NCCL INFO banners are benign by design; whether the line is root or symptom, and often its
  domain, depend on the lines around it).

Lines the corpus notes call benign noise are checked the other way round: at most 1 % of
them may yield a non-benign event. :data:`LEFT` lists the few lines deliberately not
matched, each with its reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from engine.extract import extract_lines
from engine.rules.loader import load_rule_pack

CORPUS_DIR = Path(os.environ.get("CAUSELAKE_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
CORPUS = CORPUS_DIR / "real_lines.jsonl"
if not CORPUS.is_file():
    message = f"corpus {CORPUS} not found — set CAUSELAKE_CORPUS to the folder holding real_lines.jsonl"
    if os.environ.get("CI") == "true":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)

LABEL_DOMAINS: dict[str, set[str] | None] = {
    "gpu_hardware": {"gpu", "gpu_memory"},
    "gpu_driver": {"gpu"},
    "fabric": {"network"},
    "nvlink": {"nvlink"},
    "host": {"host"},
    "storage": {"storage"},
    "scheduler": {"scheduler"},
    "application": {"workload"},
    "user": {"workload"},
    # A crash inside the communication library (segfault in libnccl) is a root cause whose
    # domain depends on the rest of the evidence; any domain is accepted.
    "communication_symptom": None,
}
"""Corpus domain label → verdict domains an event may have for a ``root_cause`` line."""

DOMAIN_OVERRIDES: dict[str, tuple[set[str], str]] = {
    # https://github.com/qiita-spots/qiita/issues/3521
    "Slurm `State=OUT_OF_MEMORY`": (
        {"host"}, "OUT_OF_MEMORY is the step cgroup's OOM killer: host memory (FAILURES.md §11)"),
    # https://github.com/jdblischak/smk-simple-slurm/issues/29
    "State: OUT_OF_MEMORY": (
        {"host"}, "OUT_OF_MEMORY is the step cgroup's OOM killer: host memory (FAILURES.md §11)"),
    # https://github.com/nebius/soperator/issues/854
    "salloc: error: Node failure on": (
        {"host"}, "a node failure is host.node_failure in the verdict catalog (ARCHITECTURE.md §5)"),
}
"""Root-cause lines whose label domain the design maps elsewhere: prefix → (domains, why)."""

NOT_A_CASCADE: dict[str, tuple[str, str]] = {
    # https://github.com/scitix/sichek/pull/121 and https://github.com/NVIDIA/DCGM/issues/224
    "CUDA-capable device(s) is/are busy or unavailable": (
        "root_candidate", "a GPU no process can use: the confirmation of an XID on its node when the "
        "kernel printed one (precedence), else the only evidence of the broken GPU"),
    "GPU 0 API call cudaEventCreate failed for GPU0: 'CUDA-capable device(s)": (
        "root_candidate", "as above, seen by DCGM's diagnostics"),
    # https://github.com/mk-minchul/AdaFace/issues/14
    "RuntimeError: CUDA error: device-side assert triggered": (
        "root_candidate", "application or GPU (FAILURES.md §11 'either'): the rank's first device "
        "error is the workload root unless an XID on the node outranks it (precedence)"),
    # https://github.com/huawei-noah/Efficient-Computing/issues/115
    "ERROR in training steps: CUDA error: device-side assert triggered": (
        "root_candidate", "as above: the kernel assertion it follows is not a separate rule"),
    # https://github.com/tensorflow/tensorflow/issues/25866
    "2019-02-19 13:19:12.200064: E tensorflow/stream_executor/event.cc:34]": (
        "root_candidate", "unspecified launch failure is 'either' (FAILURES.md §11); an XID on "
        "the node outranks it"),
    # https://github.com/aws/aws-parallelcluster/issues/2701
    "Apr 30 13:50:10 ip-10-0-33-4 kernel: [268274.472582] Lustre:": (
        "root_candidate", "a lost MDT connection is where storage trouble first shows; the "
        "thread's cause (OOM on the head node) is in no log of the job"),
    # https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr1-13B-base/chronicles.md
    'File "/gpfswork/rech/six/commun/conda/tr1-13B/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py"': (
        "context", "a traceback frame: which call raised, not an event of its own"),
    # prefix of the line → (role the pack gives it, why that is right for a "symptom" line)
    "[Sun Feb 23 16:24:18 2025] NVRM: GPU4 RPC history": (
        "context", "GSP RPC history dump: background of the Xid 119 it follows, not a failure"),
    "[Sun Feb 23 16:24:18 2025] NVRM:      0    103  GSP_RM_ALLOC": (
        "context", "a row of the GSP RPC history dump"),
    "[Sun Feb 23 16:24:18 2025] NVRM:     -7    4108 UCODE_LIBOS_PRINT": (
        "context", "a row of the GSP RPC history dump"),
    "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints": (
        "confirmation", "the driver repeating a GSP failure corroborates the Xid 119 root"),
    "2020/08/10 19:09:42 XidCriticalError: Xid=69": (
        "root_candidate", "the k8s device plugin's report of an Xid: the confirmation of the "
        "kernel's XID line on its node when there is one (precedence), else the only witness"),
    "Jun 12 16:31:50 fedora-box kernel: NVRM: GPU0 nvCheckOkFailedNoLog": (
        "confirmation", "NV_ERR_RESET_REQUIRED is the state an earlier GPU fault leaves; the "
        "same condition is labelled root_cause in another thread (sichek#51)"),
}
"""Symptom lines modelled as corroboration or background instead of a cascade."""

LEFT: dict[str, str] = {
    # https://github.com/NVIDIA/NVSentinel/issues/1748
    "r06-01  11760  <--   r06-06  10416": "not a log line: a per-node Xid 45 count table",
    # https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md
    "[default7]: iteration   42784/ 115311": (
        "fail-slow GPU: a normal progress line, the drop shows only in throughput metrics"),
    # https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/accelerator/nvidia/xid/testdata/dmesg-with-xid-119.log
    "[Sun Feb 23 16:24:30 2025] clocksource: Long readout interval": (
        "clocksource watchdog note printed between GSP dumps; says nothing about the GPU"),
    # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1045
    "kwi 15 07:56:59 testowy kernel: NVRM: Xid (PCI:0000:07:00): 109": (
        "Xid 109 is a root candidate; here it repeats after an Xid 38, which the decision "
        "stage picks as the earlier root — one line cannot tell"),
    # https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr1-13B-base/chronicles.md
    "RuntimeError: CUDA error: out of memory": (
        "a CUDA OOM from a broken GPU reads exactly like a real one; the XID on the node "
        "outranks it when there is one (precedence.xid_over_cuda_error)"),
    # https://github.com/IGNF/myria3d/issues/123
    "Preparing test set...:": (
        "a progress bar: only its length against the NCCL timeout, on the rank that did not "
        "time out, makes it the root — no single line can say that"),
    # https://github.com/ovro-lwa/lwa-issues/issues/117
    "[11219.196673] mce: [Hardware Error]: Machine check events logged": (
        "the kernel prints it for corrected errors too (mce_notify_irq, from the poll timer and "
        "CMCI): context; the incident's uncorrectable error is its EDAC UE line, a root"),
    "[11219.196715] EDAC skx MC3: HANDLING MCE MEMORY ERROR": (
        "skx_edac prints it before decoding any memory MCE, corrected or not: context; the "
        "decoded EDAC UE line that follows is the root"),
    # https://github.com/BVLC/caffe/issues/6020
    "futex_wait_queue_me": "not a log line: the wait channel ps prints for a process",
    # https://github.com/bigscience-workshop/bigscience/blob/9e64edec2ad1fb9263bf39ba616a84ff64b4d947/train/tr11-176B-ml/chronicles.md
    "_try_get_data (torch/utils/data/dataloader.py": "not a log line: a py-spy dump of a live rank",
    'Thread 688514 (idle): "MainThread"': "not a log line: a py-spy dump of a live rank",
    # https://github.com/olcf/olcf-test-harness/issues/254
    "x      oblex_nod+": "not a log line: an sacct row (states come from the attempts table)",
    # https://github.com/Azure/az-hop/issues/1210
    "cyclecloud_node_fail slurm": "not a log line: an sinfo -R row (node reasons, not job output)",
    # https://github.com/MFlowCode/MFC/pull/1771
    "PreemptType       =": "not a log line: scontrol show config output",
}
"""Lines deliberately left unmatched (or matched otherwise than labelled), with the reason."""


def _is_benign_noise(row: dict) -> bool:
    notes = row["notes"].lower()
    return notes.startswith("benign") and not notes.startswith("benign-ish")


ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
CHECKED = [(i, row) for i, row in enumerate(ROWS) if not _is_benign_noise(row)]


def _left(line: str) -> str | None:
    return next((why for prefix, why in LEFT.items() if line.startswith(prefix)), None)


@pytest.fixture(scope="module")
def events_by_line() -> dict[int, list[dict]]:
    events = extract_lines([row["line"] for row in ROWS], load_rule_pack())
    events = events.with_columns(
        (pl.col("origin").str.extract(r":(\d+)$").cast(pl.Int64) - 1).alias("line_index")
    )
    grouped: dict[int, list[dict]] = {}
    for event in events.select("line_index", "rule_id", "domain", "cause", "role").to_dicts():
        grouped.setdefault(event["line_index"], []).append(event)
    return grouped


def _params():
    for index, row in CHECKED:
        why = _left(row["line"])
        marks = [pytest.mark.skip(reason=f"left deliberately: {why}")] if why else []
        yield pytest.param(index, id=f"{index}-{row['root_cause_or_symptom']}-{row['category']}", marks=marks)


@pytest.mark.parametrize("index", list(_params()))
def test_line_yields_the_labelled_kind_of_event(index: int, events_by_line):
    row = ROWS[index]
    events = events_by_line.get(index, [])
    seen = [(e["rule_id"], e["domain"], e["role"]) for e in events]
    label = row["root_cause_or_symptom"]
    where = f"{row['line'][:160]!r} ({row['source']})"
    if label == "root_cause":
        override = next((v for k, v in DOMAIN_OVERRIDES.items() if row["line"].startswith(k)), None)
        domains = override[0] if override else LABEL_DOMAINS[row["domain"]]
        assert any(
            (domains is None or e["domain"] in domains) and e["role"] in ("root_candidate", "confirmation")
            for e in events
        ), f"root cause of domain {row['domain']} → {domains}: no root/confirmation event in {seen} for {where}"
    elif label == "symptom":
        allowed = {"cascade"}
        documented = next((v for k, v in NOT_A_CASCADE.items() if row["line"].startswith(k)), None)
        if documented:
            allowed.add(documented[0])
        assert any(e["role"] in allowed for e in events), (
            f"symptom: no {sorted(allowed)} event in {seen} for {where}"
        )
    else:
        # "either" lines are root or symptom depending on what surrounds them (and the
        # label's domain is then a guess too, e.g. a launch failure: workload or GPU).
        assert events, f"either: the pack does not recognise {where}"


def test_documented_exceptions_still_apply(events_by_line):
    """Each NOT_A_CASCADE entry names a real corpus line that still gets the stated role."""
    for prefix, (role, _why) in NOT_A_CASCADE.items():
        index = next(i for i, row in enumerate(ROWS) if row["line"].startswith(prefix))
        assert role in {e["role"] for e in events_by_line.get(index, [])}, prefix
    for prefix in (*LEFT, *DOMAIN_OVERRIDES):
        assert any(row["line"].startswith(prefix) for row in ROWS), f"entry matches no corpus line: {prefix}"


def test_benign_noise_stays_benign(events_by_line):
    noise = [i for i, row in enumerate(ROWS) if _is_benign_noise(row)]
    assert noise, "the corpus notes name some lines benign noise"
    loud = [
        (ROWS[i]["line"][:120], [(e["rule_id"], e["role"]) for e in events_by_line.get(i, []) if e["role"] != "benign"])
        for i in noise
        if any(e["role"] != "benign" for e in events_by_line.get(i, []))
    ]
    assert len(loud) <= len(noise) // 100, f"benign noise yields non-benign events: {loud}"
