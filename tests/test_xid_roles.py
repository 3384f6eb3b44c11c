"""The ``xid_roles`` python rule: repeat-offender GPUs and NVLink5 severity."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from engine.rules.python_rules import RuleContext, load_python_rule
from ingest.schema import EVENTS

RULE_FILE = Path(__file__).resolve().parents[1] / "rules" / "xid_roles.py"
T0 = datetime(2025, 1, 21, 4, 41, tzinfo=UTC)
GPU = "0000:38:00"


@pytest.fixture(scope="module")
def apply():
    return load_python_rule(RULE_FILE)


def _event(attempt: str, event: str, *, gpu: str = GPU, minutes: float = 0, detail: str = "",
           line: int | None = None) -> dict:
    """An XID event of ``attempt``; its ``line`` of the node's log is one per moment unless
    given (one line seen by two attempts whose views of the node's clock differ)."""
    ts = T0 + timedelta(minutes=minutes)
    line = round(minutes * 600) + 100000 if line is None else line
    workload = event.startswith(("xid_13", "xid_31", "xid_43"))
    return {
        "event_id": f"e-{attempt}-{event}-{minutes}", "ts": ts, "last_ts": ts, "count": 1,
        "node": "gpu001", "attempt_id": attempt, "rank": None, "gpu": gpu, "port": None,
        "source": "kmsg", "rule_id": "gpu_xid", "event": event,
        "domain": "workload" if workload else "nvlink",
        "cause": "workload.gpu_illegal_address" if workload else "nvlink.link_error",
        "role": "cascade" if event.startswith("xid_43") else "root_candidate",
        "action": "fix_workload" if workload else "check_nvlink",
        "params": json.dumps({"detail": detail}), "message": "NVRM: Xid ...", "origin": f"dmesg:{line}",
        "ts_source": "line", "cluster": "c1", "job_id": attempt.split("/")[2],
        "start_ts": T0 - timedelta(hours=3),
    }


def _frame(rows: list[dict]) -> pl.DataFrame:
    schema = pl.Schema(pl.from_arrow(EVENTS.empty_table()).schema)
    schema.update({"cluster": pl.String, "job_id": pl.String, "start_ts": pl.Datetime("us", "UTC")})
    return pl.DataFrame(rows, schema=schema)


def _context(history: list[dict] | None = None) -> RuleContext:
    frame = _frame(history).drop("job_id", "start_ts") if history else pl.DataFrame()
    return RuleContext(attempts=pl.DataFrame(), history=frame.lazy())


def test_xid_13_on_one_gpu_in_two_jobs_becomes_a_gpu_fault(apply):
    history = [_event("slurm/c1/100/0", "xid_31_mmu_fault", minutes=-600)]
    events = _frame([
        _event("slurm/c1/200/0", "xid_13_graphics_exception"),
        _event("slurm/c1/200/0", "xid_43_channel_stopped", minutes=0.1),
        _event("slurm/c1/200/0", "xid_13_graphics_exception", gpu="0000:cb:00"),
    ])
    out = apply(events, _context(history))
    assert out.schema == events.schema
    assert out["cause"].to_list() == ["gpu.repeated_xid", "gpu.repeated_xid", "workload.gpu_illegal_address"]
    assert out["domain"].to_list() == ["gpu", "gpu", "workload"]
    assert out["role"].to_list() == ["root_candidate", "root_candidate", "root_candidate"]
    assert out["action"].to_list()[:2] == ["drain_node_and_restart"] * 2
    # An inference from the repeat, never definitive: the upgraded rows only are undecided.
    assert out["params"].str.contains('"undecided"').to_list() == [True, True, False]


def test_two_jobs_in_the_same_batch_count(apply):
    events = _frame([
        _event("slurm/c1/300/0", "xid_13_graphics_exception"),
        _event("slurm/c1/301/0", "xid_13_graphics_exception", minutes=90),
    ])
    out = apply(events, _context())
    assert out["cause"].to_list() == ["gpu.repeated_xid"] * 2


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # one job, several XIDs: the job's own bug
        (("slurm/c1/400/0", 0), ("slurm/c1/400/0", 5)),
        # a requeued job is still one job
        (("slurm/c1/400/0", 0), ("slurm/c1/400/1", 60)),
        # one XID attached to two jobs that shared the node is not a repeat
        (("slurm/c1/400/0", 0), ("slurm/c1/401/0", 0)),
        # nor is one line two consecutive jobs dated apart, one of them having corrected the
        # node's clock (a node 240 s ahead: the line reads 4 minutes earlier in the second)
        (("slurm/c1/400/0", 4, 777), ("slurm/c1/401/0", 0, 777)),
    ],
)
def test_not_a_repeat_stays_a_workload_fault(apply, first, second):
    events = _frame([
        _event(first[0], "xid_13_graphics_exception", minutes=first[1], line=(first[2:] or (None,))[0]),
        _event(second[0], "xid_13_graphics_exception", minutes=second[1], line=(second[2:] or (None,))[0]),
    ])
    out = apply(events, _context())
    assert out["cause"].to_list() == ["workload.gpu_illegal_address"] * 2
    assert out["domain"].to_list() == ["workload"] * 2


def test_nonfatal_nvlink5_xid_is_context_and_fatal_stays_root(apply):
    events = _frame([
        _event("slurm/c1/500/0", "xid_145_nvlink5_error",
               detail="RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)"),
        _event("slurm/c1/500/0", "xid_149_nvlink5_error",
               detail="NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000)"),
    ])
    out = apply(events, _context())
    assert out["role"].to_list() == ["context", "root_candidate"]
    assert out["cause"].to_list() == ["nvlink.link_error"] * 2
