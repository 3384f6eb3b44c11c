"""Every real incident of the corpus through one-shot diagnosis, checked against its thread
(the expectations and their reasons live in :mod:`benchmarks.incidents`, which the accuracy
benchmark scores too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import engine.run
from benchmarks.incidents import EXPECTED, HONEST, INCIDENTS, diagnose_incident, load_incidents
from engine.rules.loader import load_rule_pack

if not INCIDENTS.is_file():
    message = f"corpus {INCIDENTS} not found — set CAUSELAKE_CORPUS to the folder holding incidents.jsonl"
    if os.environ.get("CI") == "true":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)

INCIDENT_ROWS = load_incidents()


@pytest.fixture(scope="module", autouse=True)
def _pack_loaded_once():
    """Parse the bundled pack once for the module: diagnose() would parse it per incident."""
    pack = load_rule_pack()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine.run, "load_rule_pack", lambda: pack)
        yield


def test_every_incident_has_an_expectation():
    assert {row["source"] for row in INCIDENT_ROWS} == set(EXPECTED)


# Each incident is a full one-shot ingest and run in its own lake.
@pytest.mark.parametrize("index", range(len(INCIDENT_ROWS)), ids=lambda i: f"incident-{i}")
def test_incident_verdict_matches_the_thread(tmp_path: Path, index: int):
    row = INCIDENT_ROWS[index]
    expected, why = EXPECTED[row["source"]]
    verdict = diagnose_incident(row, tmp_path)
    where = f"{row['source']} ({why}): got {verdict}"
    if expected is None:
        assert verdict["quality"] in HONEST, f"a confident verdict without support in the lines: {where}"
    else:
        assert verdict["domain"] == expected, f"expected {expected}: {where}"
