"""The whole pipeline on the bundled sample fleet: landing, attribution, golden verdicts,
determinism, idempotence, accounting of every input line, and the CLI around it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from engine.cli import app
from engine.config import EngineConfig
from engine.extract import empty_events, landing_derivation
from engine.oneshot import SAMPLES, attempt_days, land_manifest, run_demo
from engine.rules.loader import load_rule_pack
from engine.run import COUNTS, landing_lake, run_attribution
from ingest.lake import Lake
from ingest.static import land_static_context

REPO = Path(__file__).resolve().parents[1]
GOLDEN = SAMPLES / "expected_verdicts.jsonl"
GOLDEN_FIELDS = ("attempt_id", "state", "domain", "cause", "quality", "culprit_nodes", "culprit_gpus",
                 "culprit_ports", "recommended_action")
runner = CliRunner()


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory) -> Lake:
    """The samples landed as ``causelake demo`` and ``causelake ingest`` land them: each
    observations file's events extracted as it lands."""
    lake = landing_lake(tmp_path_factory.mktemp("demo") / "lake")
    run_demo(lake)
    return lake


def golden_view(results: pl.DataFrame) -> list[dict]:
    """The verdict fields the golden file pins, in attempt order."""
    return results.sort("attempt_id").select(GOLDEN_FIELDS).to_dicts()


def test_demo_verdicts_match_the_golden_file(demo_lake):
    """``data/samples/expected_verdicts.jsonl`` is the result contract on the sample fleet;
    regenerate it with ``uv run python tests/test_pipeline.py --regenerate`` when a change
    is meant to alter verdicts, and review the diff."""
    got = golden_view(demo_lake.scan("results").collect())
    want = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    assert got == want


def test_demo_verdicts_agree_with_the_sample_truth(demo_lake):
    """Every attempt's domain (and cause, or an accepted alternative) is what the scenario
    was written to produce; failed attempts name the right culprit node and rank."""
    truth = {t["attempt_id"]: t for t in yaml.safe_load((SAMPLES / "truth.yaml").read_text())["attempts"]}
    results = {r["attempt_id"]: r for r in demo_lake.scan("results").collect().to_dicts()}
    assert set(results) == set(truth)
    for attempt_id, want in truth.items():
        got = results[attempt_id]
        assert got["domain"] == want["domain"], attempt_id
        assert got["cause"] in [want["cause"], *want.get("also_accept", [])], attempt_id
        if want.get("quality"):
            assert got["quality"] == want["quality"], attempt_id
        blamed = set(got["culprit_nodes"]) | {a["node"] for a in got["alternatives"]}
        assert set(want.get("culprit_nodes") or []) <= blamed, attempt_id
        if want["domain"] == "workload":  # the job's own fault is pinned on its rank
            assert set(want.get("culprit_ranks") or []) <= set(got["culprit_ranks"]), attempt_id


def test_two_runs_give_identical_verdicts_and_events(demo_lake):
    first = demo_lake.scan("results").collect().sort("attempt_id")
    events_before = demo_lake.scan("events").collect().sort("event_id")
    since, until = first["end_ts"].min().date(), first["end_ts"].max().date()
    run_attribution(demo_lake, since, until)
    second = demo_lake.scan("results").collect().sort("attempt_id")
    assert second.height == first.height
    assert second.drop("run_id", "run_ts").equals(first.drop("run_id", "run_ts"))
    assert demo_lake.scan("events").collect().sort("event_id").equals(events_before)
    assert first["run_id"].n_unique() == 1 and second["run_id"][0] != first["run_id"][0]
    assert len(demo_lake.manifests()) == 2


def test_chunked_runs_give_the_same_verdicts_and_events(demo_lake, tmp_path):
    """Attributing one end day at a time (a chunk per day, as a run over a million attempts
    does) gives the verdicts and events of one chunk for the whole window; nothing is left
    of the run's scratch files."""
    first = demo_lake.scan("results").collect().sort("attempt_id")
    events_before = demo_lake.scan("events").collect().sort("event_id")
    since, until = first["end_ts"].min().date(), first["end_ts"].max().date()
    summary = run_attribution(demo_lake, since, until, config=EngineConfig(chunk_attempts=1))
    manifest = json.loads((demo_lake.root / "runs" / f"{summary.run_id}.json").read_text())
    assert len(manifest["chunks"]) == (until - since).days + 1 > 1
    second = demo_lake.scan("results").collect().sort("attempt_id")
    assert second.drop("run_id", "run_ts").equals(first.drop("run_id", "run_ts"))
    assert demo_lake.scan("events").collect().sort("event_id").equals(events_before)
    assert summary.verdicts.sort("attempt_id").drop("run_id", "run_ts").equals(
        second.drop("run_id", "run_ts", "day").select(summary.verdicts.drop("run_id", "run_ts").columns))
    assert summary.by_domain_quality()["attempts"].sum() == first.height
    assert not [p for p in demo_lake.root.iterdir() if p.name.startswith(".")]


def test_a_lake_landed_without_extraction_gives_the_same_verdicts_and_events(demo_lake, tmp_path):
    """A run extracts whatever has no landed events itself: the same verdicts and events;
    and it writes the derivatives it lacked, the same as landing writes them."""
    plain = Lake(tmp_path / "plain")
    land_manifest(plain, SAMPLES / "manifest.yaml")
    assert not (plain.root / "_derived").exists()
    run_attribution(plain, *attempt_days(plain))
    for table, key in (("results", "attempt_id"), ("events", "event_id")):
        got = plain.scan(table).collect().sort(key).drop("run_id", "run_ts", strict=False)
        assert got.equals(demo_lake.scan(table).collect().sort(key).drop("run_id", "run_ts", strict=False)), table
    files = plain.files("observations")
    for name in (landing_derivation(load_rule_pack()).name, COUNTS.name):
        written = plain.derived(name, files)
        landed = demo_lake.derived(name, demo_lake.files("observations"))
        assert len(written) == len(landed) > 1 and None not in written, name
        for mine, theirs in zip(written, landed, strict=True):
            got, want = pl.read_parquet(mine), pl.read_parquet(theirs)
            assert got.sort(got.columns, nulls_last=True).equals(want.sort(want.columns, nulls_last=True)), mine


def test_a_run_reads_the_events_landed_for_its_own_extract_rules_only(tmp_path):
    """With the landed events of its pack a run does not read the lines (emptied landed
    events leave only the metric events), nor with a pack that differs only where
    extraction does not look (a python rule, a comment); with other extract rules it
    extracts the lines itself."""
    lake = landing_lake(tmp_path / "lake")
    run_demo(lake)
    events = lake.scan("events").collect().sort("event_id")
    since, until = attempt_days(lake)
    files = lake.files("observations")
    landed = lake.derived(landing_derivation(load_rule_pack()).name, files)
    assert len(files) > 1 and None not in landed and None not in lake.derived(COUNTS.name, files)
    for path in landed:
        empty_events().write_parquet(path)
    run_attribution(lake, since, until)
    assert lake.scan("events").filter(pl.col("source") != "metrics").collect().is_empty()
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    (rules / "benign.yaml").write_text((rules / "benign.yaml").read_text() + "\n# another pack\n")
    (rules / "straggler.py").write_text((rules / "straggler.py").read_text() + "\n# edited\n")
    edited = load_rule_pack([rules])
    assert edited.version != load_rule_pack().version
    run_attribution(lake, since, until, pack=edited)
    assert lake.scan("events").filter(pl.col("source") != "metrics").collect().is_empty()
    banner = '    prefilter: ["NCCL INFO", "Connected all"]\n'
    (rules / "benign.yaml").write_text((rules / "benign.yaml").read_text().replace(
        banner, banner.replace(']', ', "Init COMPLETE"]'), 1))
    other = load_rule_pack([rules])
    run_attribution(lake, since, until, pack=other)
    assert lake.scan("events").collect().sort("event_id").equals(events)


def test_landing_the_samples_twice_changes_nothing(tmp_path):
    lake = Lake(tmp_path / "lake")
    land_manifest(lake, SAMPLES / "manifest.yaml")
    tables = ("attempts", "observations", "rejects")
    before = {t: lake.scan(t).collect() for t in tables}
    files_before = sorted(p.relative_to(lake.root) for p in lake.root.rglob("*.parquet"))
    land_manifest(lake, SAMPLES / "manifest.yaml")
    for table in tables:
        after = lake.scan(table).collect()
        assert after.height == before[table].height, table
        if table != "rejects":  # rejects carry the ingest time
            assert after.sort(after.columns[:3]).equals(before[table].sort(after.columns[:3])), table
    assert sorted(p.relative_to(lake.root) for p in lake.root.rglob("*.parquet")) == files_before


def test_every_sample_line_is_an_observation_or_a_reject(demo_lake):
    """Nothing is silently dropped: per input file, non-blank lines == observations + rejects."""
    manifest = yaml.safe_load((SAMPLES / "manifest.yaml").read_text())
    files = []
    for item in manifest["inputs"]:
        if item["kind"] != "files":
            continue
        path = SAMPLES / item["path"]
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    landed = pl.concat([
        demo_lake.scan("observations").select("input_id").collect(),
        demo_lake.scan("rejects").select("input_id").collect(),
    ]).group_by("input_id").len()
    counts = dict(landed.iter_rows())
    for path in files:
        lines = sum(1 for line in path.read_text(errors="replace").splitlines() if line.strip())
        assert counts.get(str(path.resolve()), 0) == lines, path


def _failed_job_context(tmp_path, nodes: str):
    """A static context file of one failed job (7, on ``nodes``) on 2026-11-28."""
    context = tmp_path / "ctx.yaml"
    context.write_text(
        "cluster: c\nattempts:\n  - job_id: '7'\n    start: 2026-11-28T10:00:00Z\n"
        f"    end: 2026-11-28T11:00:00Z\n    state: FAILED\n    exit_code: '1:0'\n    nodes: '{nodes}'\n"
    )
    return context


def test_an_attempt_without_observations_is_insufficient_and_names_the_missing_sources(tmp_path):
    lake = Lake(tmp_path / "lake")
    context = _failed_job_context(tmp_path, "n[1-2]")
    result = runner.invoke(app, ["ingest", "static", str(context), "--lake", str(lake.root)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["run", "--lake", str(lake.root), "--day", "2026-11-28", "--json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout.splitlines()[0])
    assert (verdict["domain"], verdict["quality"]) == ("unknown", "insufficient")
    errors = {c["source"]: c["error"] for c in verdict["coverage"] if c["error"]}
    assert "n1, n2" in errors["node_logs"] and "app_logs" in errors


def test_a_run_deletes_the_scratch_folder_a_killed_run_left(tmp_path):
    lake = Lake(tmp_path / "lake")
    context = _failed_job_context(tmp_path, "n1")
    land_static_context(lake, context)
    # What a run killed mid-way leaves: tempfile's folder named after its run id.
    stale = Path(tempfile.mkdtemp(prefix=".run-20261128T120000Z-0a1b2c-", dir=lake.root))
    (stale / "chunk-0.parquet").write_bytes(b"PAR1 half a chunk")
    kept = [lake.root / ".run-notes", lake.root / "run-20261128T120000Z-0a1b2c-archive"]
    for folder in kept:
        folder.mkdir()
    run_attribution(lake, date(2026, 11, 28), date(2026, 11, 28))
    assert not stale.exists()
    assert all(folder.is_dir() for folder in kept)


def test_a_run_over_a_path_with_no_lake_is_an_error_that_creates_nothing(tmp_path):
    from typer.testing import CliRunner

    from engine.cli import app

    result = CliRunner().invoke(app, ["run", "--lake", str(tmp_path / "typo"), "--day", "2026-11-28"])
    assert result.exit_code == 2 and "no attempts landed here" in result.output
    assert not (tmp_path / "typo").exists()


def test_explain_prints_the_timeline_and_json(demo_lake):
    result = runner.invoke(app, ["explain", "static/demo/1001/0", "--lake", str(demo_lake.root)])
    assert result.exit_code == 0, result.output
    assert "gpu.fallen_off_bus" in result.stdout and "evidence timeline" in result.stdout
    result = runner.invoke(app, ["explain", "static/demo/1001/0", "--lake", str(demo_lake.root), "--json"])
    record = json.loads(result.stdout)
    assert record["culprit_nodes"] == ["gpu003"] and record["evidence"][0]["origin"]


def test_log_text_and_addresses_print_verbatim(demo_lake):
    """PCI addresses and log lines are data: ``0000:ab:00`` is no emoji code and ``[Rank 0]``
    no markup tag."""
    result = runner.invoke(app, ["explain", "static/demo/1014/0", "--lake", str(demo_lake.root)])
    assert "0000:ab:00" in result.stdout
    result = runner.invoke(app, ["explain", "static/demo/1001/0", "--lake", str(demo_lake.root)])
    assert "[Rank 0]" in result.stdout


def test_extract_json_gives_one_event_per_matching_line(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(
        # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150 (shape of a real XID 79 line)
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
        "an ordinary line that no rule matches\n"
    )
    result = runner.invoke(app, ["extract", str(log), "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["domain"], e["cause"], e["role"], e["origin"].rsplit(":", 1)[1]) for e in events] == [
        ("gpu", "gpu.fallen_off_bus", "root_candidate", "1")]


@pytest.mark.parametrize(("args", "message"), [
    (["ingest", "files", "missing.log", "--cluster", "c"], "no such file"),
    (["ingest", "files", "{log}", "--cluster", "c", "--source", "sylog"], "did you mean"),
    (["ingest", "files", "{log}", "--cluster", "c", "--timezone", "CST6"], "unknown time zone 'CST6'"),
    (["ingest", "static", "missing.yaml"], "missing.yaml"),
    (["run", "--day", "2026-13-01"], "is not a day"),
    (["explain", "nope"], "no verdict for 'nope'"),
])
def test_bad_input_gives_one_clear_line_and_exit_2(tmp_path, args, message):
    log = tmp_path / "a.log"
    log.write_text("hello\n")
    lake = tmp_path / "lake"
    argv = [a.replace("{log}", str(log)) for a in args] + ["--lake", str(lake)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(lake.rglob("*.parquet")) if lake.exists() else True


def test_run_lists_the_latest_failures_and_says_how_many_are_left(demo_lake):
    """The console of a run shows the counts and at most ``--show`` failed attempts (the
    latest), never the successes, and points at the full results."""
    results = demo_lake.scan("results").collect()
    since, until = results["end_ts"].min().date(), results["end_ts"].max().date()
    failed = results.filter(pl.col("domain") != "none").sort("end_ts", "attempt_id")
    assert failed.height > 2
    window = ["--since", str(since), "--until", str(until)]
    result = runner.invoke(app, ["run", "--lake", str(demo_lake.root), *window, "--show", "2"])
    assert result.exit_code == 0, result.output
    for attempt_id in failed["attempt_id"].tail(2):
        assert attempt_id in result.stdout
    for attempt_id in [*failed["attempt_id"].head(failed.height - 2), *results.filter(pl.col("domain") == "none")["attempt_id"]]:
        assert attempt_id not in result.stdout
    assert f"2 of {failed.height} failed attempts listed" in result.stderr
    every = runner.invoke(app, ["run", "--lake", str(demo_lake.root), *window, "--show", "1000"])
    assert all(a in every.stdout for a in failed["attempt_id"]) and "attempts listed" not in every.stderr


def test_a_bad_rule_pack_refuses_to_run(tmp_path, demo_lake, monkeypatch):
    bad = tmp_path / "rules"
    bad.mkdir()
    (bad / "x.yaml").write_text("rules:\n  - kind: extract\n    id: a\n    titel: typo\n")
    monkeypatch.setattr("engine.rules.loader.BUNDLED_RULES", bad)
    result = runner.invoke(app, ["run", "--lake", str(demo_lake.root), "--day", "2026-11-28"])
    assert result.exit_code == 2
    assert "x.yaml:4" in result.stderr


def test_import_contract_ingest_never_imports_engine():
    """The layering of ARCHITECTURE §1, checked by import-linter."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(tmp)
        run_demo(lake)
        rows = golden_view(lake.scan("results").collect())
        GOLDEN.write_text("".join(json.dumps(r, sort_keys=False) + "\n" for r in rows))
        print(f"wrote {len(rows)} verdicts to {GOLDEN}")


def test_diagnose_reads_zoneless_stamps_in_the_zone_given(tmp_path):
    """``diagnose --timezone``: an RFC 3164 kernel line written at 08:00 in Chicago
    (UTC-6 in November) is a fault at 14:00 UTC."""
    log = tmp_path / "syslog"
    # The XID line of tests/test_extract.py (NVIDIA's Xid catalog format) in RFC 3164.
    log.write_text("Nov 20 08:00:00 n1 kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.\n")
    stamps = {}
    for zone in ("UTC", "America/Chicago"):
        result = runner.invoke(app, ["diagnose", str(log), "--year", "2026", "--timezone", zone, "--json"])
        assert result.exit_code == 0, result.output
        verdict = json.loads(result.stdout.splitlines()[0])
        assert (verdict["cause"], verdict["culprit_nodes"]) == ("gpu.fallen_off_bus", ["n1"])
        stamps[zone] = verdict["first_fault_ts"]
    assert stamps == {"UTC": "2026-11-20T08:00:00Z", "America/Chicago": "2026-11-20T14:00:00Z"}
