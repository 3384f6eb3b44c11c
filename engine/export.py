"""Export verdicts from the lake's results table as JSON lines.

Each line is one :class:`ingest.schema.Verdict`, validated by the Pydantic model and
serialized in its JSON mode (timestamps ISO 8601), keys sorted so that exports diff cleanly.
``schemas/verdict.schema.json`` is the JSON Schema of a line, generated from the same model
(:func:`verdict_json_schema`) and committed; consumers validate against it.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import polars as pl

from ingest.lake import Lake, days_between
from ingest.schema import Verdict

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "verdict.schema.json"

EXPORT_FORMATS = ("jsonl",)


def verdict_json_schema() -> str:
    """The JSON Schema of one exported verdict, as the committed file holds it."""
    return json.dumps(Verdict.model_json_schema(), indent=2, sort_keys=True) + "\n"


def day_results(lake: Path, day: date, until: date | None = None) -> pl.DataFrame:
    """Every verdict of attempts that ended on ``day`` (UTC; through ``until`` when given),
    all clusters, in a stable order."""
    return (
        Lake(lake).scan("results", days=days_between(day, until or day)).collect()
        .sort(["cluster", "end_ts", "attempt_id"], nulls_last=True)
    )


def export_results(lake: Path, day: date, fmt: str = "jsonl", until: date | None = None) -> str:
    """The verdicts of ``day`` (through ``until`` when given) as text in ``fmt``
    (``jsonl``: one verdict per line).

    Raises ``ValueError`` for an unknown format; days without verdicts give an empty string.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format '{fmt}' — use one of {', '.join(EXPORT_FORMATS)}")
    frame = day_results(lake, day, until)
    fields = [c for c in Verdict.model_fields if c in frame.columns]
    lines = [
        json.dumps(Verdict.model_validate(row).model_dump(mode="json"), sort_keys=True) + "\n"
        for row in frame.select(fields).to_dicts()
    ]
    return "".join(lines)


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    """(Re)write the committed JSON Schema from the model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(verdict_json_schema())
    return path
