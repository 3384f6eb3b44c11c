"""Run the rule pack's inline tests (the ``tests:`` beside each rule) with the real extractor.

Extract rules: every ``hit`` line must yield an event from that rule carrying the ``expect``
fields (outcome fields — event, domain, cause, role, action — or named groups, compared as
text); every ``miss`` line must yield no event from that rule. All lines of all rules go
through :func:`engine.extract.extract_lines` as one frame, so the tests exercise the same
prefilter, Rust regex and ``map`` logic the nightly run uses.

Metric rules: each case's samples form one series; the number of condition firings (before
the flood dedupe) must equal the case's ``events``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl

from engine.extract import extract_lines
from engine.metrics import metric_events
from engine.rules.loader import RulePack, regex_for
from engine.rules.model import ExtractRule, HitCase, MissCase

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class TestResult:
    """The outcome of one inline test case (``case`` is e.g. ``hit[0]``, ``miss[1]``)."""

    __test__ = False  # not a pytest test class, despite the name

    rule_id: str
    case: str
    ok: bool
    message: str


def _why_no_match(rule: ExtractRule, line: str) -> str:
    """Which stage of the extractor rejected a line that should hit."""
    haystack = line.lower() if rule.ignore_case else line
    if not any((lit.lower() if rule.ignore_case else lit) in haystack for lit in rule.prefilter):
        return f"no prefilter literal ({', '.join(rule.prefilter)}) occurs in the line"
    matched = pl.select(pl.lit(line).str.contains(regex_for(rule))).item()
    if not matched:
        return "the regex does not match the line"
    return (
        f"the map dropped it: its '{' / '.join(rule.map.keys)}' value is not in map.table and there is "
        "no map.default" if rule.map else "the line matched but gave no event"
    )


def _check_hit(rule: ExtractRule, case: HitCase, rows: list[dict]) -> tuple[bool, str]:
    if not rows:
        return False, f"no event: {_why_no_match(rule, case.line)}"
    row = rows[0]
    values = {**json.loads(row["params"]), **row}
    wrong = [
        f"{field}: expected '{want}', got '{values.get(field)}'"
        for field, want in case.expect.items()
        if (None if values.get(field) is None else str(values.get(field))) != want
    ]
    return (False, "; ".join(wrong)) if wrong else (True, "hit")


def _extract_results(pack: RulePack) -> list[TestResult]:
    cases: list[tuple[ExtractRule, str, HitCase | MissCase]] = [
        (rule, f"{kind}[{index}]", case)
        for rule in pack.extract
        for kind, group in (("hit", rule.tests.hit), ("miss", rule.tests.miss))
        for index, case in enumerate(group)
    ]
    if not cases:
        return []
    events = extract_lines([case.line for _, _, case in cases], pack)
    found: dict[tuple[str, str], list[dict]] = {}
    for row in events.to_dicts():
        found.setdefault((row["origin"], row["rule_id"]), []).append(row)
    results = []
    for number, (rule, name, case) in enumerate(cases, start=1):
        rows = found.get((f"<input>:{number}", rule.id), [])
        if isinstance(case, HitCase):
            ok, message = _check_hit(rule, case, rows)
        else:
            ok = not rows
            message = "no event" if ok else f"matched (event '{rows[0]['event']}') but must not"
        results.append(TestResult(rule.id, name, ok, message))
    return results


def _metric_results(pack: RulePack) -> list[TestResult]:
    rows = [
        {
            "ts": _EPOCH + timedelta(seconds=seconds), "node": f"{rule.id}#{index}",
            "metric": rule.metrics[0], "value": float(value), "cluster": "test",
            "origin": f"<test>:{rule.id}#{index}:{position}",
        }
        for rule in pack.metric
        for index, case in enumerate(rule.tests)
        for position, (seconds, value) in enumerate(case.samples)
    ]
    if not rows:
        return []
    events = metric_events(pl.DataFrame(rows), pack, dedupe=False)
    counts = {
        (r["node"], r["rule_id"]): r["len"]
        for r in events.group_by("node", "rule_id").len().to_dicts()
    }
    results = []
    for rule in pack.metric:
        for index, case in enumerate(rule.tests):
            got = counts.get((f"{rule.id}#{index}", rule.id), 0)
            ok = got == case.events
            message = f"{got} events" if ok else f"expected {case.events} events, got {got}"
            results.append(TestResult(rule.id, f"metric[{index}]", ok, message))
    return results


def run_inline_tests(pack: RulePack) -> list[TestResult]:
    """Every inline test case of the pack, in rule order (extract rules, then metric)."""
    return _extract_results(pack) + _metric_results(pack)
