"""Per-rank copies of one cascade line collapse to one row per node at correlation
(``engine.correlate.collapse_rank_copies``): the same line of several ranks of a node,
equal but for the rank, within the rule's window. Unit cases over small frames, then
real PyTorch lines landed and attributed end to end."""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

from engine.config import EngineConfig
from engine.correlate import attach_events
from engine.rules.loader import load_rule_pack
from tests.end_to_end import XID_79, syslog, verdicts_by_job
from tests.engine_frames import T0, at, attempts, events

PACK = load_rule_pack()
ATTEMPT = "a1"


def timeout(rank: int, seconds: float, **fields) -> dict:
    """A watchdog timeout cascade of ``rank`` on n1, ``seconds`` after T0 + 30 min."""
    return {
        "ts": T0 + timedelta(minutes=30, seconds=seconds), "attempt_id": ATTEMPT, "rank": rank, "source": "app",
        "rule_id": "comm.nccl_watchdog_timeout", "event": "network.collective_timeout", "domain": "network",
        "cause": "network.collective_timeout", "role": "cascade", "params": '{"seqnum":"3","timeout_ms":"600000"}',
        "origin": f"slurm-1.out:{100 + rank}", **fields,
    }


def attached(*rows: dict) -> pl.DataFrame:
    job = attempts({"attempt_id": ATTEMPT, "nodes": ["n1", "n2"], "n_nodes": 2, "ranks_per_node": 4})
    return attach_events(job, events(*rows), PACK, EngineConfig())


def rows_of(frame: pl.DataFrame, rule_id: str = "comm.nccl_watchdog_timeout") -> list[dict]:
    return frame.filter(pl.col("rule_id") == rule_id).sort("ts", "rank").select(
        "node", "rank", "ranks", "count", "ts", "last_ts", "ts_hi", "event_id").to_dicts()


def test_a_line_every_rank_of_a_node_printed_is_one_row_with_their_ranks_and_count():
    # Rank 2's line is itself a flood of two (landing collapsed it).
    copies = [timeout(r, r * 0.0005, **({"count": 2} if r == 2 else {})) for r in (3, 1, 0, 2)]
    [row] = rows_of(attached(*copies))
    first = T0 + timedelta(minutes=30)
    assert (row["node"], row["rank"], row["ranks"], row["count"]) == ("n1", 0, [0, 1, 2, 3], 5)
    assert (row["ts"], row["last_ts"]) == (first, first + timedelta(seconds=0.0015))
    assert row["event_id"] == "comm.nccl_watchdog_timeout@slurm-1.out:100"  # the earliest copy's


def test_copies_of_other_nodes_params_or_bursts_stay_apart():
    far = 6 * 60  # beyond the rule's 5-minute dedupe window
    rows = rows_of(attached(
        timeout(0, 0), timeout(1, 0.001),
        timeout(4, 0.002, node="n2"),  # another node
        timeout(2, 0.003, params='{"seqnum":"4","timeout_ms":"600000"}'),  # another collective
        timeout(3, far), timeout(1, far + 0.001, origin="slurm-1.out:301"),  # the next burst
    ))
    assert [(r["node"], r["rank"], r["ranks"], r["count"]) for r in rows] == [
        ("n1", 0, [0, 1], 2), ("n2", 4, None, 1), ("n1", 2, None, 1), ("n1", 3, [1, 3], 2),
    ]


def test_root_candidates_and_node_lines_are_never_folded():
    cuda = {"rule_id": "cuda.error", "event": "gpu.cuda_error", "domain": "gpu", "cause": "gpu.cuda_error",
            "role": "root_candidate", "attempt_id": ATTEMPT, "source": "app", "ts": at(20)}
    kernel = {"rule_id": "gpu_xid", "event": "gpu.xid", "role": "cascade", "ts": at(20)}  # no rank: the node's
    frame = attached({**cuda, "rank": 0}, {**cuda, "rank": 1}, kernel, {**kernel, "origin": "n1.log:9"})
    assert sorted(frame.filter(pl.col("rule_id") == "cuda.error")["rank"].to_list()) == [0, 1]
    assert frame.filter(pl.col("rule_id") == "gpu_xid").height == 2
    assert frame["ranks"].null_count() == frame.height


def test_the_folded_row_may_have_been_printed_as_early_as_its_earliest_copy():
    """Rank 0's line inherited its stamp (its file's next stamp is a minute on); rank 1,
    in its own file, stamped its copy a second later: the row's ``ts_hi`` is rank 1's."""
    rank0 = timeout(0, 0, ts_source="inferred", origin="rank0.log:5")
    later = timeout(0, 60, rule_id="other", event="other", role="context", origin="rank0.log:6")
    rank1 = timeout(1, 1, origin="rank1.log:5")
    [row] = rows_of(attached(rank0, later, rank1))
    assert (row["rank"], row["ranks"], row["ts_hi"]) == (0, [0, 1], T0 + timedelta(minutes=30, seconds=1))


# Real PyTorch lines, as rank {r} prints them: the watchdog's own timeout
# (https://github.com/hiyouga/LlamaFactory/issues/6269) with the milliseconds it waited,
# and the teardown that follows (https://github.com/EvolvingLMMs-Lab/open-r1-multimodal/issues/20).
WATCHDOG = ("{r}: [rank{r}]:[E1120 10:40:00.75526{r}105 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for {ran} milliseconds before timing out.")
TEARDOWN = ("{r}: [rank{r}]:[E1120 10:40:00.76526{r}105 ProcessGroupNCCL.cpp:681] [Rank {r}] Some NCCL operations "
            "have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
            "might run on corrupted/incomplete data.")
SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|FAILED|134:0|2026-11-20T10:00:00|2026-11-20T10:41:00|n[1-2]|gres/gpu=4,node=2
"""


def test_real_ranks_lines_fold_per_node_in_the_evidence_and_the_verdict_stands(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # Ranks 0-1 run on n1, 2-3 on n2 (block distribution); n2's GPU fell off the bus.
    # Each watchdog counts its own milliseconds: those lines differ and stay one per rank.
    lines = [WATCHDOG.format(r=r, ran=600099 + r) for r in range(4)] + [TEARDOWN.format(r=r) for r in range(4)]
    (logs / "slurm-700.out").write_text("".join(line + "\n" for line in lines))
    (logs / "n2.log").write_text(syslog("n2", ("10:29:00", f"kernel: {XID_79}")))
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20), year=2026)["700"]
    assert (v["domain"], v["culprit_nodes"], v["affected_nodes"]) == ("gpu", ["n2"], ["n1", "n2"])
    assert v["quality"] in ("definitive", "probable")
    shown = sorted((e["rule_id"], e["node"], e["rank"], e["count"]) for e in v["evidence"] if e["role"] == "cascade")
    assert shown == [
        ("comm.nccl_async_teardown", "n1", 0, 2), ("comm.nccl_async_teardown", "n2", 2, 2),
        ("comm.nccl_watchdog_timeout", "n1", 0, 1), ("comm.nccl_watchdog_timeout", "n1", 1, 1),
        ("comm.nccl_watchdog_timeout", "n2", 2, 1), ("comm.nccl_watchdog_timeout", "n2", 3, 1),
    ]
