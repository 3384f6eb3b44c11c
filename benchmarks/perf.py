"""Performance benchmark: wall time, lines/s and peak RSS per stage (each stage runs in its own
process), the extract pass against ``rg`` on the same raw text, and batch vs one-at-a-time
attribution."""

from __future__ import annotations

import json
import multiprocessing
import resource
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import polars as pl

from benchmarks.simulate import SimReport, ingest, simulate
from engine.config import EngineConfig
from engine.oneshot import attempt_days
from engine.rules.loader import load_rule_pack
from engine.run import (
    attribute, compute_coverage, coverage_days, extract_day, landing_derivations, observation_days, run_attribution,
    scope_attempts,
)
from ingest.lake import Lake


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_child(fn, *args):
    """Run ``fn(*args)`` in a fresh (spawned) process and return its result: each stage's
    peak RSS is then its own, not inherited from the stages before it."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def stage_simulate(out: Path, attempts: int, seed: int) -> tuple[SimReport, float, float]:
    """Simulate the fleet: (report, seconds, peak RSS MiB)."""
    tick = time.perf_counter()
    sim = simulate(out, attempts, seed)
    return sim, time.perf_counter() - tick, peak_rss_mb()


def stage_ingest(lake_root: Path, raw: Path) -> tuple[dict, float, float, float]:
    """Land the simulated fleet as the ingest commands do (:func:`engine.run.landing_lake`):
    (per-cluster counts, seconds, peak RSS MiB, seconds of those spent extracting events)."""
    extract, *others = landing_derivations()
    spent = [0.0]

    def timed(rows: pl.DataFrame) -> pl.DataFrame:
        tick = time.perf_counter()
        events = extract.derive(rows)
        spent[0] += time.perf_counter() - tick
        return events

    tick = time.perf_counter()
    counts = ingest(Lake(lake_root, [replace(extract, derive=timed), *others]), raw)
    return counts, time.perf_counter() - tick, peak_rss_mb(), spent[0]


def stage_attribution(lake_root: Path) -> tuple[dict, int, float, float]:
    """Attribute every attempt of the lake: (stage timings, attempts, seconds, peak RSS MiB)."""
    lake = Lake(lake_root)
    since, until = attempt_days(lake)
    tick = time.perf_counter()
    summary = run_attribution(lake, since, until)
    return summary.timings, summary.attempts, time.perf_counter() - tick, peak_rss_mb()


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
    """Seconds to attribute ``n`` attempts (of the first end day) in one call of the engine
    core, and one call per attempt on that attempt's own events (same extraction, same
    coverage)."""
    pack, config = load_rule_pack(), EngineConfig()
    since, _ = attempt_days(lake)
    attempts = scope_attempts(lake, since, since).head(n)
    days = observation_days(since, since, config, attempts)
    events = pl.concat([extract_day(lake, pack, d, None)[0] for d in days])
    coverage = compute_coverage(lake, attempts, coverage_days(since, since, config, attempts), config)
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
    """Simulate, ingest and attribute ``attempts`` attempts, each stage in its own process;
    time each stage and record its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        sim, simulate_s, simulate_rss = in_child(stage_simulate, base / "fleet", attempts, seed)
        counts, ingest_s, ingest_rss, extract_s = in_child(stage_ingest, base / "lake", sim.out)
        engine, attributed, attribution_s, attribution_rss = in_child(stage_attribution, base / "lake")
        timings = {"simulate": simulate_s, "ingest": ingest_s, "extract_at_landing": extract_s,
                   "attribution_total": attribution_s}
        timings.update({f"engine_{k}": v for k, v in engine.items()})
        pack = load_rule_pack()
        literals = [lit for r in pack.extract for lit in r.prefilter]
        rg = rg_seconds(sim.out, literals)
        batch, single = one_at_a_time(Lake(base / "lake"), min(1000, attributed))
        report = {
            "attempts": attempts, "raw_lines": sim.lines, "files": sim.files,
            "lines_landed": sum(c["landed"] for c in counts.values()),
            "timings_s": {k: round(v, 3) for k, v in timings.items()},
            "lines_per_s": {k: round(sim.lines / v) for k, v in timings.items() if v > 0},
            "peak_rss_mb": {"simulate": round(simulate_rss), "ingest": round(ingest_rss),
                            "attribution": round(attribution_rss)},
            "raw_to_results_s": round(ingest_s + attribution_s, 3),
            "rg_s": rg, "extract_vs_rg": round(extract_s / rg, 2) if rg else None,
            "batch_s": round(batch, 3), "one_at_a_time_s": round(single, 3),
            "batch_speedup": round(single / batch, 1) if batch else None,
        }
        # Written before the work folder goes: removing a million-attempt fleet's files
        # takes minutes.
        if out:
            Path(out).write_text(json.dumps(report, indent=2))
    return report
