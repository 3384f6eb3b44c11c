"""JSONL export of verdicts and the committed JSON Schema of a verdict line."""

from __future__ import annotations

import importlib.util
import json
from datetime import date

import pytest

from engine.export import SCHEMA_PATH, export_results, verdict_json_schema
from engine.oneshot import SAMPLES, run_demo
from ingest.lake import Lake
from ingest.schema import Verdict

DAYS = (date(2026, 11, 28), date(2026, 11, 29))


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory) -> Lake:
    """The sample fleet landed and attributed by the real pipeline (read-only in tests)."""
    lake = Lake(tmp_path_factory.mktemp("export-lake"))
    run_demo(lake, SAMPLES)
    return lake


def test_committed_schema_is_the_generated_one():
    assert SCHEMA_PATH.read_text() == verdict_json_schema(), (
        "schemas/verdict.schema.json is stale — regenerate it with "
        "`uv run python -c 'from engine.export import write_schema; write_schema()'`"
    )


def test_export_has_one_valid_verdict_per_attempt_of_the_day(sample_lake):
    schema = json.loads(SCHEMA_PATH.read_text())
    validator = None
    if importlib.util.find_spec("jsonschema"):
        import jsonschema

        validator = jsonschema.Draft202012Validator(schema)
    total = 0
    for day in DAYS:
        text = export_results(sample_lake.root, day)
        lines = text.splitlines()
        expected = sample_lake.scan("results", days=[day]).select("attempt_id").collect()["attempt_id"]
        assert sorted(json.loads(line)["attempt_id"] for line in lines) == sorted(expected)
        for line in lines:
            record = json.loads(line)
            Verdict.model_validate_json(line)
            if validator is not None:
                validator.validate(record)
            assert record["day"] == day.isoformat()
            assert list(record) == sorted(record), "keys are sorted so exports diff cleanly"
        total += len(lines)
    assert total == 20  # every sample attempt, each exported on its end day
    # A window of days exports what its days export, in the same order.
    window = export_results(sample_lake.root, DAYS[0], until=DAYS[1])
    ordered = sorted(window.splitlines(), key=lambda line: json.loads(line)["day"])
    assert ordered == window.splitlines() and len(ordered) == 20


def test_export_carries_the_evidence_of_a_failure(sample_lake):
    lines = [json.loads(x) for x in export_results(sample_lake.root, DAYS[0]).splitlines()]
    fallen = next(r for r in lines if r["attempt_id"] == "static/demo/1001/0")
    assert fallen["state"] == "failed" and fallen["domain"] == "gpu"
    assert fallen["evidence"] and all({"ts", "node", "rule_id", "origin"} <= set(e) for e in fallen["evidence"])
    assert fallen["end_ts"].startswith("2026-11-28T10:51:42")


def test_export_of_an_empty_day_and_a_bad_format(sample_lake, tmp_path):
    assert export_results(sample_lake.root, date(2020, 1, 1)) == ""
    assert export_results(tmp_path, DAYS[0]) == ""
    with pytest.raises(ValueError, match="unknown export format 'csv'"):
        export_results(sample_lake.root, DAYS[0], fmt="csv")


def test_schema_rejects_an_unknown_domain(sample_lake):
    record = json.loads(export_results(sample_lake.root, DAYS[0]).splitlines()[0])
    record["domain"] = "cosmic_rays"
    with pytest.raises(Exception, match="domain"):
        Verdict.model_validate(record)
    if importlib.util.find_spec("jsonschema"):
        import jsonschema

        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(record, json.loads(SCHEMA_PATH.read_text()))
