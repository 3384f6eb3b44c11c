"""Ingest scale timing: simulate a fleet, land it through the real connectors, print figures.

Run ``uv run python -m benchmarks.ingest_scale [attempts] [--keep DIR]``. Prints the files and
lines simulated, the ingest wall time, lines/s, the number of Parquet files the lake holds
and the peak RSS of the process. Not a test: a timing script to compare before/after.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.perf import in_child, peak_rss_mb
from benchmarks.simulate import ingest, simulate
from engine.run import landing_lake


def run(attempts: int, workdir: Path, seed: int = 0) -> dict:
    """Simulate ``attempts`` attempts under ``workdir`` and time their ingest. The
    simulator runs in a child process, so the peak RSS reported is the ingest's."""
    tick = time.perf_counter()
    sim = in_child(simulate, workdir / "raw", attempts, seed)
    simulated = time.perf_counter() - tick
    lake = landing_lake(workdir / "lake")
    tick = time.perf_counter()
    counts = ingest(lake, sim.out)
    seconds = time.perf_counter() - tick
    lines = sum(c["lines_read"] for c in counts.values())
    return {
        "attempts": sim.attempts,
        "files": sim.files,
        "lines": lines,
        "simulate_s": round(simulated, 1),
        "ingest_s": round(seconds, 2),
        "lines_per_s": round(lines / seconds) if seconds else None,
        "parquet_files": len(lake.files("observations")),
        "peak_rss_mb": round(peak_rss_mb()),
    }


def main() -> None:
    """Command-line entry: ``attempts`` (default 10 000) and an optional folder to keep."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("attempts", type=int, nargs="?", default=10_000)
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one)")
    args = parser.parse_args()
    if args.keep:
        figures = run(args.attempts, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="causelake-ingest-") as tmp:
            figures = run(args.attempts, Path(tmp))
    for key, value in figures.items():
        print(f"{key:>14}: {value}")


if __name__ == "__main__":
    main()
