"""The bundled rule pack: it lints clean, every inline test passes, and the suppress and
precedence rules only name events, causes and rules that the pack can actually produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.rules.loader import BUNDLED_RULES, RulePack, lint_rule_pack, load_rule_pack
from engine.rules.model import Outcome, Selector
from engine.rules.testing import run_inline_tests

RULE_FILES = sorted(BUNDLED_RULES.glob("*.yaml"))


@pytest.fixture(scope="module")
def pack() -> RulePack:
    return load_rule_pack()


def test_bundled_pack_lints_clean() -> None:
    issues = lint_rule_pack()
    assert not issues, "\n".join(str(issue) for issue in issues)


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_inline_tests_pass(path: Path) -> None:
    file_pack = load_rule_pack([path])
    results = run_inline_tests(file_pack)
    failures = [f"{r.rule_id} {r.case}: {r.message}" for r in results if not r.ok]
    tested = {r.rule_id for r in results}
    untested = [r.id for r in (*file_pack.extract, *file_pack.metric) if r.id not in tested]
    assert not untested, f"rules without inline test results: {untested}"
    assert not failures, "\n".join(failures)


def _outcomes(pack: RulePack) -> list[Outcome]:
    """Every outcome an extract/metric/state rule can emit (its own and its map's)."""
    outcomes: list[Outcome] = []
    for rule in (*pack.extract, *pack.metric, *pack.state):
        outcomes.append(rule)
        mapping = getattr(rule, "map", None)
        if mapping is not None:
            outcomes += [o.model_copy(update={k: v for k, v in rule.model_dump().items()
                                              if k in Outcome.model_fields and getattr(o, k) is None})
                         for o in (*mapping.table.values(), *([mapping.default] if mapping.default else []))]
    return outcomes


def dangling_references(pack: RulePack) -> list[str]:
    """Names in suppress/precedence selectors that no rule of ``pack`` produces."""
    outcomes = _outcomes(pack)
    events = {o.event for o in outcomes}
    causes = {o.cause for o in outcomes}
    rule_ids = {r.id for r in (*pack.extract, *pack.metric, *pack.state)} | {
        r.rule.id if hasattr(r, "rule") else r.id for r in pack.python
    }
    problems = []
    for rule in (*pack.suppress, *pack.precedence):
        for side in ("root", "cascade", "prefer", "over"):
            selector: Selector | None = getattr(rule, side, None)
            if selector is None:
                continue
            for kind, names, known in (("event", selector.events, events),
                                       ("cause", selector.causes, causes),
                                       ("rule", selector.rules, rule_ids)):
                problems += [f"{rule.id}.{side}: no rule emits {kind} '{name}'"
                             for name in names or () if name not in known]
    return problems


def test_selectors_reference_emitted_names(pack: RulePack) -> None:
    problems = dangling_references(pack)
    assert not problems, "\n".join(problems)


def test_dangling_reference_is_reported(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(
        (BUNDLED_RULES / "communication.yaml").read_text()
    )
    (tmp_path / "typo.yaml").write_text(
        "rules:\n"
        "  - kind: suppress\n"
        "    id: typo\n"
        "    title: misspelt event\n"
        "    root: {roles: [root_candidate]}\n"
        "    cascade: {events: [network.colective_timeout], causes: [network.collective_timeout]}\n"
        "    window: 40m\n"
    )
    problems = dangling_references(load_rule_pack([tmp_path]))
    assert problems == ["typo.cascade: no rule emits event 'network.colective_timeout'"]


def test_outcome_cause_belongs_to_its_domain(pack: RulePack) -> None:
    wrong = [f"{o.event}: cause {o.cause} in domain {o.domain}" for o in _outcomes(pack)
             if o.cause and o.domain and o.cause.split(".")[0] != o.domain]
    assert not wrong, "\n".join(wrong)


def test_every_hit_line_cites_a_public_source(pack: RulePack) -> None:
    missing = [f"{rule.id}: {case.line[:60]}" for rule in pack.extract for case in rule.tests.hit
               if not case.ref.startswith("https://")]
    assert not missing, "\n".join(missing)
