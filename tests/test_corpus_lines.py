"""Every real corpus line through the whole bundled rule pack.

The corpus (``real_lines.jsonl``: verbatim lines, each with its source URL, a domain label and
``root_cause_or_symptom``) is read from ``$CAUSELAKE_CORPUS`` or ``/work/shared/corpus``.
For each line the bundled pack must say what the label says:

* ``root_cause`` → an event of the mapped domain (:data:`LABEL_DOMAINS`) whose role is
  ``root_candidate`` or ``confirmation``;
* ``symptom`` → an event with role ``cascade`` (or the role listed in
  :data:`NOT_A_CASCADE`, where a symptom is deliberately modelled as corroboration or
  background);
* ``either`` → some event that is not ``benign``.

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

CORPUS = Path(os.environ.get("CAUSELAKE_CORPUS", "/work/shared/corpus")) / "real_lines.jsonl"
if not CORPUS.is_file():
    pytest.skip(
        f"corpus {CORPUS} not found — set CAUSELAKE_CORPUS to the folder holding real_lines.jsonl",
        allow_module_level=True,
    )

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

NOT_A_CASCADE: dict[str, tuple[str, str]] = {
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
        "confirmation", "the k8s device plugin's report of an Xid corroborates the kernel's"),
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
        "a CUDA OOM from a broken GPU reads exactly like a real one; only the repeat on one "
        "node across jobs tells them apart"),
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
        domains = LABEL_DOMAINS[row["domain"]]
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
        assert any(e["role"] != "benign" for e in events), f"either: no non-benign event in {seen} for {where}"


def test_documented_exceptions_still_apply(events_by_line):
    """Each NOT_A_CASCADE entry names a real corpus line that still gets the stated role."""
    for prefix, (role, _why) in NOT_A_CASCADE.items():
        index = next(i for i, row in enumerate(ROWS) if row["line"].startswith(prefix))
        assert role in {e["role"] for e in events_by_line.get(index, [])}, prefix
    for prefix in LEFT:
        assert any(row["line"].startswith(prefix) for row in ROWS), f"LEFT entry matches no corpus line: {prefix}"


def test_benign_noise_stays_benign(events_by_line):
    noise = [i for i, row in enumerate(ROWS) if _is_benign_noise(row)]
    assert noise, "the corpus notes name some lines benign noise"
    loud = [
        (ROWS[i]["line"][:120], [(e["rule_id"], e["role"]) for e in events_by_line.get(i, []) if e["role"] != "benign"])
        for i in noise
        if any(e["role"] != "benign" for e in events_by_line.get(i, []))
    ]
    assert len(loud) <= len(noise) // 100, f"benign noise yields non-benign events: {loud}"
