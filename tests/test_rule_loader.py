"""Rule pack loading and linting: located errors, all at once; python rules; inline tests."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from engine.rules.catalog import cause_catalog
from engine.rules.loader import (
    BUNDLED_RULES, RulePackError, lint_rule_pack, load_rule_pack,
)
from engine.rules.python_rules import (
    UNDECIDED_PARAM, PythonRuleError, RuleContext, param, run_python_rules, with_param,
)
from engine.rules.testing import run_inline_tests

HERE = Path(__file__).parent
BAD = HERE / "bad_rules"
GOOD = HERE / "good_rules"

# file in tests/bad_rules → (line, field, a fragment the message must contain)
BAD_RULES = {
    "bad_cause.yaml": (10, "cause", "must look like <domain>.<name>"),
    "bad_duration.yaml": (13, "dedupe_window", "'5 minutes' is not a duration — write e.g. 30s"),
    "duplicate_key.yaml": (14, "role", "duplicate key 'role' (lines 11 and 14)"),
    "empty.yaml": (1, "", "file is empty"),
    "expect_unknown_field.yaml": (18, "tests.hit.0.expect.code", "expects field 'code', which the rule never yields"),
    "group_shadows_column.yaml": (7, "regex", "named group 'count' has the name of an event column"),
    "key_in_wrong_place.yaml": (8, "prefer.window", "key 'window' does not belong here"),
    "map_key_not_group.yaml": (15, "map.key", "map.key 'code' is not a named group of the regex (groups: gpu, xid)"),
    "map_key_list_not_group.yaml": (15, "map.key", "map.key 'code' is not a named group of the regex (groups: gpu, xid)"),
    "map_table_bad_domain.yaml": (19, "map.table.48.domain", "unknown domain 'gpu_mem' — did you mean 'gpu_memory'?"),
    "metric_bad_condition.yaml": (7, "condition", "unknown condition 'rises' — use one of: increase, above, below, change"),
    "missing_field.yaml": (3, "event", "missing required field 'event'"),
    "python_missing_file.yaml": (6, "path", "does_not_exist.py does not exist"),
    "python_no_apply.yaml": (6, "path", "defines no function apply(events, context)"),
    "regex_python.yaml": (7, "regex", "does not compile in Python re"),
    "regex_rust_backreference.yaml": (7, "regex", "does not compile in Polars (Rust regex engine)"),
    "regex_rust_lookbehind.yaml": (7, "regex", "Polars (Rust regex engine): look-around"),
    "subject_node_no_group.yaml": (8, "subject_node", "subject_node needs a named group 'node' in the regex (groups: nodes)"),
    "top_level_key.yaml": (2, "version", "unknown top-level key 'version'"),
    "unknown_action.yaml": (12, "action", "unknown action 'drain'"),
    "unknown_domain.yaml": (9, "domain", "unknown domain 'gpus' — did you mean 'gpu'?"),
    "unknown_key.yaml": (14, "regx", "unknown key 'regx' — did you mean 'regex'?"),
    "unknown_kind.yaml": (3, "kind", "unknown kind 'extractor' — did you mean 'extract'?"),
    "unknown_role.yaml": (11, "role", "unknown role 'root'"),
    # The wording is libyaml's or PyYAML's, whichever parser is installed; the place is the same.
    "yaml_syntax.yaml": (7, "", "quoted scalar (from line 5)"),
}


def test_every_bad_rule_file_is_in_the_table():
    assert {p.name for p in BAD.glob("*.yaml")} == set(BAD_RULES)


@pytest.mark.parametrize("name", sorted(BAD_RULES))
def test_bad_rule_file_gives_its_located_error(name):
    line, field, fragment = BAD_RULES[name]
    issues = lint_rule_pack([BAD / name])
    assert len(issues) == 1, [str(i) for i in issues]
    issue = issues[0]
    assert (Path(issue.file).name, issue.line, issue.field) == (name, line, field)
    assert fragment in issue.message
    with pytest.raises(RulePackError) as raised:
        load_rule_pack([BAD / name])
    assert str(raised.value) == str(issue)


def test_duplicate_rule_ids_across_files_name_both_places():
    issues = lint_rule_pack([BAD / "duplicate_ids"])
    assert [(Path(i.file).name, i.line, i.rule_id, i.field) for i in issues] == [("b.yaml", 4, "bad.xid", "id")]
    assert "a.yaml:4" in issues[0].message


def test_a_pack_with_several_errors_reports_all_of_them(tmp_path):
    shutil.copy(BAD / "unknown_domain.yaml", tmp_path / "one.yaml")
    two = (BAD / "regex_rust_lookbehind.yaml").read_text().replace("id: bad.xid", "id: bad.other")
    two = two.replace("action: investigate", "action: drain")
    (tmp_path / "two.yaml").write_text(two)
    (tmp_path / "three.yml").write_text("rules:\n  - kind: suppress\n    id: bad.suppress\n")
    issues = lint_rule_pack([tmp_path])
    located = {(Path(i.file).name, i.line, i.field) for i in issues}
    assert located == {
        ("one.yaml", 9, "domain"),
        ("two.yaml", 7, "regex"),
        ("two.yaml", 12, "action"),
        ("three.yml", 2, "title"),
        ("three.yml", 2, "root"),
        ("three.yml", 2, "cascade"),
        ("three.yml", 2, "window"),
    }
    with pytest.raises(RulePackError) as raised:
        load_rule_pack([tmp_path])
    lines = str(raised.value).splitlines()
    assert len(lines) == len(issues) == 7
    assert all(re.fullmatch(r".+\.ya?ml:\d+: rule [\w.]+: [\w.]+: .+", ln) for ln in lines)


def test_duplicate_key_in_a_nested_mapping_names_both_lines(tmp_path):
    text = (GOOD / "pack.yaml").read_text()
    text = text.replace(
        "        45: {event: gpu_channel_teardown",
        "        79: {event: again}\n        45: {event: gpu_channel_teardown",
    )
    (tmp_path / "pack.yaml").write_text(text)
    first = text.splitlines().index(next(ln for ln in text.splitlines() if ln.startswith("        79: {event: gpu_fallen")))
    issues = lint_rule_pack([tmp_path])
    assert [(i.line, i.rule_id, i.field) for i in issues] == [(first + 2, "test.nvrm_xid", "map.table.79")]
    assert f"lines {first + 1} and {first + 2}" in issues[0].message


def test_good_pack_loads_with_a_deterministic_version(tmp_path):
    pack = load_rule_pack([GOOD])
    assert [len(pack.extract), len(pack.metric), len(pack.suppress), len(pack.python)] == [5, 2, 0, 0]
    assert re.fullmatch(r"7-[0-9a-f]{12}", pack.version)
    assert load_rule_pack([GOOD / "pack.yaml"]).version == pack.version
    copy = tmp_path / "pack.yaml"
    copy.write_bytes((GOOD / "pack.yaml").read_bytes())
    assert load_rule_pack([tmp_path]).version == pack.version
    copy.write_bytes(copy.read_bytes() + b"\n# edited\n")
    assert load_rule_pack([tmp_path]).version != pack.version


def test_default_pack_is_the_bundled_rules_folder():
    assert BUNDLED_RULES == Path(__file__).resolve().parents[1] / "rules"


def test_missing_path_is_reported(tmp_path):
    issues = lint_rule_pack([tmp_path / "nope"])
    assert len(issues) == 1 and "no such file or folder" in issues[0].message


PYTHON_RULE = '''
import polars as pl


def apply(events: pl.DataFrame, context) -> pl.DataFrame:
    """Any event on a node that also shows {target} becomes a confirmation."""
    return events.with_columns(
        role=pl.when(pl.col("event") == "{target}").then(pl.lit("confirmation")).otherwise("role")
    ){tail}
'''


def _python_pack(tmp_path: Path, tail: str = "") -> Path:
    (tmp_path / "confirm.py").write_text(PYTHON_RULE.format(target="gpu_xid", tail=tail))
    (tmp_path / "python.yaml").write_text(
        "rules:\n  - kind: python\n    id: test.confirm\n    title: Confirm xids\n    path: confirm.py\n"
    )
    return tmp_path


def test_python_rule_is_loaded_by_path_and_run(tmp_path):
    pack = load_rule_pack([_python_pack(tmp_path)])
    assert [p.rule.id for p in pack.python] == ["test.confirm"]
    events = pl.DataFrame({"event": ["gpu_xid", "other"], "role": ["context", "cascade"]})
    context = RuleContext(attempts=pl.DataFrame(), history=pl.LazyFrame())
    out = run_python_rules(events, pack.python, context)
    assert out["role"].to_list() == ["confirmation", "cascade"]


def test_python_rule_that_drops_a_column_is_refused(tmp_path):
    pack = load_rule_pack([_python_pack(tmp_path, tail=".drop('event')")])
    events = pl.DataFrame({"event": ["gpu_xid"], "role": ["context"]})
    context = RuleContext(attempts=pl.DataFrame(), history=pl.LazyFrame())
    with pytest.raises(PythonRuleError, match="test.confirm .* must return a DataFrame with the columns"):
        run_python_rules(events, pack.python, context)


def test_python_rule_that_fails_to_import_is_a_located_issue(tmp_path):
    _python_pack(tmp_path)
    (tmp_path / "confirm.py").write_text("def apply(events, context)\n")
    issues = lint_rule_pack([tmp_path])
    assert [(i.line, i.field) for i in issues] == [(5, "path")]
    assert "SyntaxError" in issues[0].message


def test_causes_a_python_rule_declares_are_in_the_catalog(tmp_path):
    _python_pack(tmp_path)
    with (tmp_path / "confirm.py").open("a") as fh:
        fh.write('CAUSES = (("gpu.confirmed_xid", "gpu", "confirmation", "gpu_xid"),)\n')
    catalog = cause_catalog(load_rule_pack([tmp_path]))
    assert catalog.filter(pl.col("cause") == "gpu.confirmed_xid").select("domain", "roles", "rules").row(0) == (
        "gpu", "confirmation", "test.confirm"
    )


@pytest.mark.parametrize(("declaration", "message"), [
    ('CAUSES = (("gpu.confirmed_xid", "gpu"),)', "give a tuple of (cause, domain, role, event) strings"),
    ('HISTORY_EVENTS = ("host.node_boot", 7)', "HISTORY_EVENTS holds 7 — give event names (strings)"),
    ('COPIES_OUTCOMES = "yes"', "COPIES_OUTCOMES is 'yes' — give True or False"),
])
def test_a_malformed_declaration_is_a_located_issue(tmp_path, declaration, message):
    _python_pack(tmp_path)
    with (tmp_path / "confirm.py").open("a") as fh:
        fh.write(declaration + "\n")
    issues = lint_rule_pack([tmp_path])
    assert [(i.line, i.field) for i in issues] == [(5, "path")]
    assert message in issues[0].message


def test_the_history_events_python_rules_declare_are_the_packs(tmp_path):
    _python_pack(tmp_path)
    with (tmp_path / "confirm.py").open("a") as fh:
        fh.write('HISTORY_EVENTS = ("host.node_boot", "gpu_xid")\n')
    pack = load_rule_pack([tmp_path])
    assert pack.python[0].history_events == ("host.node_boot", "gpu_xid")
    assert pack.history_events() == ("gpu_xid", "host.node_boot")


def test_only_a_rule_that_copies_outcomes_names_nodes_as_they_do(tmp_path):
    """The installed pack's memory cgroup kill names no node; a python rule's rows name
    nodes as it does only when the rule says they copy outcomes."""
    installed = Path(__file__).resolve().parents[1] / "rules"
    _python_pack(tmp_path)
    copied = pl.col("rule_id") == "test.confirm"
    assert load_rule_pack([installed, tmp_path]).node_naming().filter(copied).is_empty()
    with (tmp_path / "confirm.py").open("a") as fh:
        fh.write("COPIES_OUTCOMES = True\n")
    naming = load_rule_pack([installed, tmp_path]).node_naming().filter(copied)
    assert ("test.confirm", "host.cgroup_oom_kill", "never") in naming.rows()


def test_inline_tests_of_the_good_pack_pass():
    results = run_inline_tests(load_rule_pack([GOOD]))
    assert len(results) == 13
    assert [str(r) for r in results if not r.ok] == []


def test_inline_tests_report_each_failing_case_with_the_reason(tmp_path):
    text = (GOOD / "pack.yaml").read_text()
    text = text.replace("expect: {rank: 3, op: ALLREDUCE", "expect: {rank: 4, op: ALLREDUCE")
    text = text.replace(  # a miss line that the rule does match
        '        - line: "NVRM: GPU 0000:06:00.0: GPU has fallen off the bus."\n'
        "          ref: https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151\n\n",
        '        - line: "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."\n'
        "          ref: https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151\n\n",
    )
    text = text.replace("[0, 3], [60, 3], [120, 4], [180, 0], [240, 0], [300, 2]]\n        events: 2",
                        "[0, 3], [60, 3], [120, 4], [180, 0], [240, 0], [300, 2]]\n        events: 3")
    text = text.replace('prefilter: ["fallen off the bus"]', 'prefilter: ["fell off the bus"]')
    (tmp_path / "pack.yaml").write_text(text)
    failed = {(r.rule_id, r.case): r.message for r in run_inline_tests(load_rule_pack([tmp_path])) if not r.ok}
    assert failed == {
        ("test.nccl_watchdog_timeout", "hit[0]"): "rank: expected '4', got '3'",
        ("test.nvrm_xid", "miss[0]"): "matched (event 'gpu_fallen_off_bus') but must not",
        ("test.gpu_fallen_off_bus", "hit[0]"): "no event: no prefilter literal (fell off the bus) occurs in the line",
        ("test.ib_link_downed", "metric[0]"): "expected 3 events, got 2",
    }


def test_with_param_adds_a_string_param_to_the_rows_selected_only():
    frame = pl.DataFrame({"params": ['{"peer": "10.0.0.8<0>"}', "{}", None, '{"peer": "x"}']})
    out = with_param(frame, pl.Series([True, True, True, False]), UNDECIDED_PARAM, "either end")
    assert [json.loads(p) for p in out["params"]] == [
        {"undecided": "either end", "peer": "10.0.0.8<0>"}, {"undecided": "either end"}, {"undecided": "either end"},
        {"peer": "x"},
    ]
    assert out.select(param(UNDECIDED_PARAM))["params"].to_list() == ["either end"] * 3 + [None]
