"""The fleet simulator: reproducible bytes, real formats, every fault kind with its truth."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from benchmarks.faults import CATALOG
from benchmarks.fleet import fmt
from benchmarks.simulate import simulate


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "inputs.json"):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path):
    a = simulate(tmp_path / "a", 120, seed=5)
    b = simulate(tmp_path / "b", 120, seed=5)
    c = simulate(tmp_path / "c", 120, seed=6)
    assert digest(a.out) == digest(b.out)
    assert digest(a.out) != digest(c.out)


def test_every_scenario_and_real_shapes(tmp_path):
    sim = simulate(tmp_path / "f", 200, seed=1)
    truth = pl.read_parquet(sim.truth)
    assert set(truth["scenario"]) == {s.name for s in CATALOG}
    assert truth.filter(pl.col("scenario") == "two_faults")["culprit_nodes"].list.len().min() == 2
    sacct = (sim.out / "alpha" / "sacct.txt").read_text().splitlines()
    assert sacct[0].startswith("JobID|JobIDRaw|JobName|User|Partition|Submit|Start|End|State|ExitCode|NodeList")
    text = "\n".join(p.read_text() for p in sim.out.rglob("slurm-*.out"))
    assert "Watchdog caught collective operation timeout" in text
    assert " NCCL INFO Bootstrap : Using bond0:" in text
    # torchrun's echo of a stop lands before slurmstepd's banner in some outputs (a trap: it
    # takes an earlier line's stamp).
    outputs = [p.read_text() for p in sim.out.rglob("slurm-*.out")]
    echo = "SignalException: Process "
    assert any(echo in t and t.index(echo) < t.index(" CANCELLED AT ") for t in outputs)
    kernel = "\n".join(p.read_text() for p in sim.out.rglob("syslog.*"))
    assert "GPU has fallen off the bus." in kernel and "CRON[" in kernel


def test_benign_volume_is_counted_and_real(tmp_path):
    sim = simulate(tmp_path / "f", 200, seed=1)
    logs = [p for p in sim.out.rglob("*") if p.name.startswith(("slurm-", "syslog.", "dmesg."))]
    assert sim.files == len(logs)
    assert sim.lines == sum(len(p.read_text().splitlines()) for p in logs)
    assert sim.lines >= 50 * sim.attempts
    app = "\n".join(p.read_text() for p in logs if p.name.startswith("slurm-"))
    assert "0: > setting random seeds to " in app
    assert "7:  > number of parameters on (tensor, pipeline) model parallel rank (7, 0): " in app
    syslog = "\n".join(p.read_text() for p in logs if p.name.startswith("syslog."))
    assert "]: pam_unix(cron:session): session opened for user root(uid=0) by (uid=0)\n" in syslog
    assert "]: pam_unix(cron:session): session closed for user root\n" in syslog


def test_fmt_is_concat_str_with_format_semantics():
    df = pl.DataFrame({"a": [1, None], "b": ["x", "y"]})
    assert df.select(fmt("<{}|{}>", "a", pl.col("b").str.to_uppercase())).to_series().to_list() == ["<1|X>", None]
    with pytest.raises(ValueError, match="2 placeholders for 1 arguments"):
        fmt("{}{}", "a")
