"""Performance benchmark: wall time, lines/s and peak RSS per stage, the extract pass against
``rg`` on the same raw text, and batch vs one-at-a-time attribution."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.simulate import ingest, simulate
from engine.config import EngineConfig
from engine.oneshot import attempt_days
from engine.rules.loader import load_rule_pack
from engine.run import attribute, compute_coverage, extract_day, observation_days, run_attribution, scope_attempts
from ingest.lake import Lake


def peak_rss_mb() -> dict:
    """Peak resident memory of this process and of its waited-for children (MiB)."""
    return {"self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def rg_seconds(root: Path, literals: list[str]) -> float | None:
    """Time for ``rg`` to find the rule pack's literals in every raw file under ``root``
    (None when ripgrep is not installed)."""
    rg = shutil.which("rg")
    if rg is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(sorted(set(literals))))
    tick = time.perf_counter()
    subprocess.run([rg, "-c", "-F", "-f", fh.name, str(root)], capture_output=True, check=False)
    return time.perf_counter() - tick


def one_at_a_time(lake: Lake, n: int) -> tuple[float, float]:
    """Seconds to attribute ``n`` attempts in one call of the engine core, and one call per
    attempt on that attempt's own events (same extraction, same coverage)."""
    pack, config = load_rule_pack(), EngineConfig()
    since, until = attempt_days(lake)
    attempts = scope_attempts(lake, since, until).head(n)
    days = observation_days(since, until, config)
    events = pl.concat([extract_day(lake, pack, d, None)[0] for d in days])
    coverage = compute_coverage(lake, attempts, days, config)
    tick = time.perf_counter()
    attribute(attempts, events, coverage, pack, config)
    batch = time.perf_counter() - tick
    tick = time.perf_counter()
    for i in range(attempts.height):  # the baseline being measured: one engine call per attempt
        one = attempts.slice(i, 1)
        attempt_id, nodes = one["attempt_id"][0], one["nodes"][0].to_list()
        # What a per-workload service would fetch for this attempt alone: its own lines and
        # its nodes' events.
        mine = events.filter((pl.col("attempt_id") == attempt_id) | pl.col("node").is_in(nodes))
        attribute(one, mine, coverage.filter(pl.col("attempt_id") == attempt_id), pack, config)
    return batch, time.perf_counter() - tick


def bench_perf(attempts: int, out: str | Path | None = None, workdir: str | Path | None = None, seed: int = 0) -> dict:
    """Simulate, ingest and attribute ``attempts`` attempts; time each stage."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        timings: dict[str, float] = {}
        tick = time.perf_counter()
        sim = simulate(base / "fleet", attempts, seed)
        timings["simulate"] = time.perf_counter() - tick
        lake = Lake(base / "lake")
        tick = time.perf_counter()
        counts = ingest(lake, sim.out)
        timings["ingest"] = time.perf_counter() - tick
        since, until = attempt_days(lake)
        tick = time.perf_counter()
        summary = run_attribution(lake, since, until)
        timings["attribution_total"] = time.perf_counter() - tick
        timings.update({f"engine_{k}": v for k, v in summary.timings.items()})
        pack = load_rule_pack()
        literals = [lit for r in pack.extract for lit in r.prefilter]
        rg = rg_seconds(sim.out, literals)
        batch, single = one_at_a_time(lake, min(1000, summary.attempts))
        report = {
            "attempts": attempts, "raw_lines": sim.lines, "files": sim.files,
            "lines_landed": sum(c["landed"] for c in counts.values()),
            "timings_s": {k: round(v, 3) for k, v in timings.items()},
            "lines_per_s": {k: round(sim.lines / v) for k, v in timings.items() if v > 0},
            "peak_rss_mb": peak_rss_mb(),
            "rg_s": rg, "extract_vs_rg": round(timings["engine_extract"] / rg, 2) if rg else None,
            "batch_s": round(batch, 3), "one_at_a_time_s": round(single, 3),
            "batch_speedup": round(single / batch, 1) if batch else None,
        }
    if out:
        Path(out).write_text(json.dumps(report, indent=2))
    return report
