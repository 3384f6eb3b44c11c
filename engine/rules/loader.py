"""Load and lint the rule pack: YAML rule files (+ python rules) → a validated :class:`RulePack`.

Every problem in the pack is collected, never just the first: YAML syntax errors, duplicate
keys (naming both lines), unknown keys, missing fields, values outside the closed
vocabularies, bad durations, regexes that do not compile in Python ``re`` or in Polars' Rust
engine (which has no lookaround or backreferences), a ``map.key`` that is not a named group,
test expectations on fields the rule never yields, duplicate rule ids across files, python
rule files that are missing or lack ``apply``. Each is a :class:`RuleIssue` located at a
file, line, rule id and field path (``map.table.79.domain``).

``lint_rule_pack`` returns the issues; ``load_rule_pack`` raises :class:`RulePackError`
listing all of them, or returns the pack.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from engine.rules import model
from engine.rules.model import (
    ExtractRule, MetricRule, PrecedenceRule, PythonRule, Rule, StateRule, SuppressRule,
)
from engine.rules.python_rules import (
    LoadedPythonRule, PythonRuleError, declared_causes, declared_copies_outcomes, declared_history_events,
    load_python_rule,
)
from ingest.schema import EVENTS

BUNDLED_RULES = Path(__file__).resolve().parents[2] / "rules"
"""The rule pack shipped with causelake (the repository's ``rules/`` folder)."""

OUTCOME_FIELDS = ("event", "domain", "cause", "role", "action")
"""Event fields a rule's outcome sets; test ``expect`` may name these or a named group."""

RESERVED_GROUPS = ("gpu", "port", "rank", "node")
"""Named groups that fill location columns instead of ``params``."""

SHADOWED_GROUPS = tuple(name for name in EVENTS.names if name not in RESERVED_GROUPS)
"""Event columns a named group must not be called: the group would go to ``params`` while
readers (and the rule's tests) see the column of that name."""

_RULE = TypeAdapter(Rule)
_KINDS = ("extract", "suppress", "precedence", "metric", "state", "python")
_KNOWN_KEYS = sorted({
    name
    for cls in vars(model).values()
    if isinstance(cls, type) and issubclass(cls, BaseModel)
    for name in cls.model_fields
})


@dataclass(frozen=True)
class RuleIssue:
    """One problem in the pack, located at a file, line, rule and field path."""

    file: str
    line: int
    rule_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: rule {self.rule_id or '-'}: {self.field or '-'}: {self.message}"


class RulePackError(Exception):
    """The pack has problems; ``issues`` lists every one, ``str()`` one per line."""

    def __init__(self, issues: Sequence[RuleIssue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


@dataclass(frozen=True)
class RulePack:
    """A validated rule pack, by kind, with the files it came from and its version.

    ``version`` is ``<number of rules>-<first 12 hex digits of the sha256 of the files'
    bytes>`` (files in sorted order, python rule files included), so the same pack always
    has the same version wherever it is installed.
    """

    extract: tuple[ExtractRule, ...]
    suppress: tuple[SuppressRule, ...]
    precedence: tuple[PrecedenceRule, ...]
    metric: tuple[MetricRule, ...]
    state: tuple[StateRule, ...]
    python: tuple[LoadedPythonRule, ...]
    files: tuple[Path, ...]
    version: str

    def _outcomes(self) -> Iterator[tuple[ExtractRule | MetricRule, model.Outcome]]:
        """``(rule, outcome)`` for every extract or metric rule and each entry of its map."""
        for rule in (*self.extract, *self.metric):
            yield rule, rule
            if getattr(rule, "map", None) is not None:
                for outcome in (*rule.map.table.values(), rule.map.default):
                    if outcome is not None:
                        yield rule, outcome

    def _outcome_table(self, flag: str, dtype: pl.DataType, kept: Callable[[object], bool]) -> pl.DataFrame:
        """``rule_id``, ``event`` and ``flag`` (of ``dtype``) of each outcome whose value of
        ``flag`` (its own, else its rule's) ``kept`` accepts, once per rule and event."""
        rows = []
        for rule, outcome in self._outcomes():
            value = getattr(outcome, flag)
            value = getattr(rule, flag) if value is None else value
            if kept(value):
                rows.append({"rule_id": rule.id, "event": outcome.event or rule.event, flag: value})
        schema = {"rule_id": pl.String, "event": pl.String, flag: dtype}
        return pl.DataFrame(rows, schema=schema).unique(["rule_id", "event"], keep="first", maintain_order=True)

    def node_naming(self) -> pl.DataFrame:
        """``rule_id``, ``event`` and ``names_node`` of every extract or metric outcome
        whose root does not always name its node (:attr:`model.Outcome.names_node`; a map
        entry inherits its rule's value). Each is listed under the id of every python rule
        whose rows copy other rules' outcomes (``COPIES_OUTCOMES``) too: such a copy names
        nodes as the outcome does (a heterogeneous component's copy of its sibling's memory
        cgroup kill names none)."""
        own = self._outcome_table("names_node", pl.String(), lambda names: names not in (None, "always"))
        copies = own.drop("rule_id").join(
            pl.DataFrame({"rule_id": [loaded.rule.id for loaded in self.python if loaded.copies_outcomes]},
                         schema={"rule_id": pl.String}),
            how="cross",
        )
        return pl.concat([own, copies.select(own.columns)]).unique(["rule_id", "event"], keep="first", maintain_order=True)

    def passing(self) -> pl.DataFrame:
        """``rule_id``, ``event`` and ``passes`` of every extract or metric outcome whose
        fault passes by itself (:attr:`model.Outcome.passes`; a map entry inherits its
        rule's value)."""
        return self._outcome_table("passes", pl.Boolean(), bool)

    @cached_property
    def extraction_digest(self) -> bytes:
        """Digest of what of the pack decides the events of a line: its extract rules,
        without their titles and inline tests. Editing a python, suppress or precedence
        rule, a comment or a test changes the pack's version, not this."""
        digest = hashlib.sha256()
        for rule in self.extract:
            digest.update(rule.model_dump_json(exclude={"title", "tests"}).encode())
        return digest.digest()

    def history_events(self) -> tuple[str, ...]:
        """The event names the pack's python rules read from past events (their
        ``HISTORY_EVENTS``), sorted: what a run keeps of the events table in memory."""
        return tuple(sorted({e for loaded in self.python for e in loaded.history_events}))

    def dedupe_seconds(self) -> dict[str, float]:
        """Flood-dedupe window in seconds per rule id (extract and metric rules)."""
        return {r.id: model.parse_duration(r.dedupe_window) for r in (*self.extract, *self.metric)}


# --- YAML with line numbers -----------------------------------------------------------


class _Map(dict):
    """A YAML mapping that remembers its line, each key's line and any duplicate keys."""

    line: int
    key_lines: dict[Any, int]
    duplicates: list[tuple[Any, int, int]]


class _Seq(list):
    """A YAML sequence that remembers its line and each item's line."""

    line: int
    item_lines: list[int]


# libyaml's parser when PyYAML was built with it: the pack is parsed on every run and the
# pure-Python parser takes seconds; both keep the marks the located errors need.
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _LineLoader(_SafeBase):
    """PyYAML's safe loader, building :class:`_Map`/:class:`_Seq` with 1-based lines."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    mapping = _Map()
    mapping.line, mapping.key_lines, mapping.duplicates = node.start_mark.line + 1, {}, []
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "found an unhashable key (a list or mapping used as a key)", key_node.start_mark,
            ) from None
        line = key_node.start_mark.line + 1
        if key in mapping:
            # The first occurrence wins; the duplicate is reported with both lines.
            mapping.duplicates.append((key, mapping.key_lines[key], line))
            continue
        mapping.key_lines[key] = line
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> _Seq:
    seq = _Seq(loader.construct_object(child, deep=True) for child in node.value)
    seq.line = node.start_mark.line + 1
    seq.item_lines = [child.start_mark.line + 1 for child in node.value]
    return seq


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def _duplicate_keys(node: Any, path: tuple) -> Iterator[tuple[tuple, Any, int, int]]:
    if isinstance(node, _Map):
        for key, first, second in node.duplicates:
            yield path, key, first, second
        for key, value in node.items():
            yield from _duplicate_keys(value, (*path, key))
    elif isinstance(node, _Seq):
        for index, value in enumerate(node):
            yield from _duplicate_keys(value, (*path, index))


# --- locating pydantic errors -----------------------------------------------------------


def _locate(node: Any, loc: tuple) -> tuple[int, str]:
    """The YAML line and dotted field path of a pydantic error location inside a rule."""
    line = node.line
    parts: list[str] = []
    for index, part in enumerate(loc):
        if index == 0 and isinstance(node, _Map) and part == node.get("kind") and part not in node:
            continue  # the discriminated union's tag, not a key
        if part == "[key]":
            continue
        if isinstance(node, _Map):
            key = next((k for k in node if k == part or str(k) == str(part)), None)
            parts.append(str(part))
            if key is None:
                break  # a missing field: point at the mapping that should hold it
            line, node = node.key_lines[key], node[key]
        elif isinstance(node, _Seq) and isinstance(part, int) and part < len(node):
            parts.append(str(part))
            line, node = node.item_lines[part], node[part]
        else:
            parts.append(str(part))
    return line, ".".join(parts)


def _suggest(word: object, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" — did you mean '{close[0]}'?" if close else ""


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _message(error: dict) -> str:
    """A one-line message for a pydantic error, ending with the fix where there is one."""
    kind, loc, value = error["type"], error["loc"], error.get("input")
    name = next((str(p) for p in reversed(loc) if isinstance(p, str) and p != "[key]"), "")
    if kind == "extra_forbidden":
        if name in _KNOWN_KEYS:
            return f"key '{name}' does not belong here — remove it, or move it to the part of the rule that takes it"
        hint = _suggest(name, _KNOWN_KEYS) or " — remove it"
        return f"unknown key '{name}'{hint}"
    if kind == "missing":
        return f"missing required field '{name}' — add it"
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", error.get("ctx", {}).get("expected", ""))
        noun = {"domains": "domain", "roles": "role", "states": "state"}.get(name, name)
        hint = _suggest(value, choices) or f" — use one of: {', '.join(choices)}"
        return f"unknown {noun} {_short(value)}{hint}"
    if kind == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag", value)
        hint = _suggest(tag, _KINDS) or f" — use one of: {', '.join(_KINDS)}"
        return f"unknown kind '{tag}'{hint}"
    if kind == "union_tag_not_found":
        return f"missing field 'kind' — add kind: one of {', '.join(_KINDS)}"
    if kind == "value_error":
        return error["msg"].removeprefix("Value error, ")
    return f"{error['msg']} (got {_short(value)})"


# --- checks that need more than the model ---------------------------------------------


def _rust_regex_error(pattern: str) -> str | None:
    """The Polars (Rust regex) compile error of ``pattern``, or None when it compiles."""
    try:
        pl.select(pl.lit("", dtype=pl.String).str.contains(pattern))
    except pl.exceptions.PolarsError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines()]
        reason = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "")
        return reason.removeprefix("error:").strip()
    return None


def regex_for(rule: ExtractRule) -> str:
    """The pattern the extractor runs for ``rule`` (``ignore_case`` as an inline flag)."""
    return f"(?i){rule.regex}" if rule.ignore_case else rule.regex


def _check_extract(node: _Map) -> Iterator[tuple[int, str, str]]:
    """Cross-field problems of an extract rule: (line, field path, message).

    Works on the YAML node rather than the validated model so that these are reported
    together with any field error of the same rule (pydantic validation stops at the model).
    """
    regex = node.get("regex")
    if not isinstance(regex, str):
        return
    try:
        groups = sorted(re.compile(regex).groupindex)
    except re.error:
        return  # the model reports a regex Python cannot compile
    rust = _rust_regex_error(f"(?i){regex}" if node.get("ignore_case") is True else regex)
    if rust:
        yield node.key_lines["regex"], "regex", (
            f"regex does not compile in Polars (Rust regex engine): {rust} — Rust regex has "
            "no lookaround or backreferences; rewrite the pattern without them"
        )
    literals = node.get("prefilter")
    for index, literal in enumerate(literals if isinstance(literals, _Seq) else []):
        if literal == "":
            yield literals.item_lines[index], f"prefilter.{index}", (
                "empty prefilter literal matches every line — give a literal every match contains"
            )
    listed = ", ".join(groups) or "none"
    for name in groups:
        if name in SHADOWED_GROUPS:
            yield node.key_lines["regex"], "regex", (
                f"named group '{name}' has the name of an event column, which hides it — rename the "
                f"group (event columns: {', '.join(SHADOWED_GROUPS)})"
            )
    mapping = node.get("map")
    key = mapping.get("key") if isinstance(mapping, _Map) else None
    for name in [key] if isinstance(key, str) else key if isinstance(key, _Seq) else []:
        if isinstance(name, str) and name not in groups:
            yield mapping.key_lines["key"], "map.key", (
                f"map.key '{name}' is not a named group of the regex (groups: {listed})"
                f" — name a group (?P<{name}>...) or use one of the groups"
            )
    for subject in ("node", "rank"):
        if node.get(f"subject_{subject}") is True and subject not in groups:
            yield node.key_lines[f"subject_{subject}"], f"subject_{subject}", (
                f"subject_{subject} needs a named group '{subject}' in the regex (groups: {listed})"
                f" — name the group that holds the {subject} (?P<{subject}>...)"
            )
    tests = node.get("tests")
    hits = tests.get("hit") if isinstance(tests, _Map) else None
    for index, case in enumerate(hits if isinstance(hits, _Seq) else []):
        expect = case.get("expect") if isinstance(case, _Map) else None
        for field in expect if isinstance(expect, _Map) else []:
            if field not in groups and field not in OUTCOME_FIELDS:
                yield expect.key_lines[field], f"tests.hit.{index}.expect.{field}", (
                    f"test expects field '{field}', which the rule never yields (groups: "
                    f"{listed}; outcome fields: {', '.join(OUTCOME_FIELDS)})"
                )


# --- the pack ------------------------------------------------------------------------------


def _rule_files(paths: Sequence[Path] | None) -> tuple[list[Path], list[RuleIssue]]:
    files: list[Path] = []
    issues: list[RuleIssue] = []
    for path in [BUNDLED_RULES] if paths is None else [Path(p) for p in paths]:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        elif path.is_file():
            files.append(path)
        else:
            issues.append(RuleIssue(str(path), 0, None, "", "no such file or folder — check the path"))
    return files, issues


def _parse(path: Path, issues: list[RuleIssue]) -> Any:
    def add(line: int, field: str, message: str, rule_id: str | None = None) -> None:
        issues.append(RuleIssue(str(path), line, rule_id, field, message))

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        add(0, "", f"cannot read the file: {exc}")
        return None
    loader = _LineLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if exc.context_mark is not None and exc.context_mark is not mark:
            # The scanner fails where it gives up; say where the broken construct began.
            context += f" (from line {exc.context_mark.line + 1})"
        detail = " ".join(p for p in (context.strip(), exc.problem or "") if p)
        add(mark.line + 1 if mark else 1, "", f"YAML syntax error: {detail} — fix the YAML")
        return None
    except yaml.YAMLError as exc:
        add(1, "", f"YAML error: {exc}")
        return None
    finally:
        loader.dispose()
    rules = data.get("rules") if isinstance(data, _Map) else None
    for where, key, first, second in _duplicate_keys(data, ()):
        rule_id = None
        if len(where) >= 2 and where[0] == "rules" and isinstance(rules, _Seq):
            item = rules[where[1]]
            rule_id = item.get("id") if isinstance(item, _Map) else None
        field = ".".join(str(p) for p in (*where[2:], key))
        add(second, field, f"duplicate key '{key}' (lines {first} and {second}) — keep one", rule_id)
    return data


def _collect(paths: Sequence[Path] | None) -> tuple[list[RuleIssue], RulePack]:
    files, issues = _rule_files(paths)
    rules: list[Any] = []
    loaded_python: list[LoadedPythonRule] = []
    seen_ids: dict[str, str] = {}
    for path in files:
        def add(line: int, field: str, message: str, rule_id: str | None = None) -> None:
            issues.append(RuleIssue(str(path), line, rule_id, field, message))

        before = len(issues)
        data = _parse(path, issues)
        if data is None:
            if len(issues) == before:
                add(1, "", "file is empty — start it with 'rules:' and a list of rules")
            continue
        if not isinstance(data, _Map):
            add(1, "", "the top level must be a mapping with the key 'rules' — add 'rules:'")
            continue
        for key in data:
            if key != "rules":
                add(data.key_lines[key], str(key), f"unknown top-level key '{key}' — only 'rules' is allowed")
        items = data.get("rules")
        if not isinstance(items, _Seq):
            add(data.key_lines.get("rules", 1), "rules", "'rules' must be a list of rules — add '- kind: ...' items")
            continue
        for index, item in enumerate(items):
            line = items.item_lines[index]
            if not isinstance(item, _Map):
                add(line, "", "a rule must be a mapping with kind, id and title — fix this item")
                continue
            rule_id = item.get("id") if isinstance(item.get("id"), str) else None
            if rule_id is not None:
                if rule_id in seen_ids:
                    add(item.key_lines["id"], "id", f"duplicate rule id '{rule_id}' (also at "
                        f"{seen_ids[rule_id]}) — give each rule a unique id", rule_id)
                else:
                    seen_ids[rule_id] = f"{path}:{item.key_lines['id']}"
            if item.get("kind") == "extract":
                for at, field, message in _check_extract(item):
                    add(at, field, message, rule_id)
            try:
                rule = _RULE.validate_python(item)
            except ValidationError as exc:
                for error in exc.errors():
                    if error["type"].startswith("union_tag"):
                        at, field = item.key_lines.get("kind", line), "kind"
                    else:
                        at, field = _locate(item, error["loc"])
                    add(at, field, _message(error), rule_id)
                continue
            if isinstance(rule, PythonRule):
                target = path.parent / rule.path
                try:
                    apply = load_python_rule(target)
                    loaded_python.append(LoadedPythonRule(
                        rule, target, apply, declared_causes(apply), declared_history_events(apply),
                        declared_copies_outcomes(apply),
                    ))
                except PythonRuleError as exc:
                    add(item.key_lines["path"], "path", str(exc), rule_id)
                    continue
            rules.append(rule)
    hashed = sorted({*(f.resolve() for f in files), *(p.path.resolve() for p in loaded_python)})
    digest = hashlib.sha256()
    for file in hashed:
        digest.update(file.read_bytes())
    by_kind = {kind: tuple(r for r in rules if r.kind == kind) for kind in _KINDS}
    pack = RulePack(
        extract=by_kind["extract"], suppress=by_kind["suppress"],
        precedence=by_kind["precedence"], metric=by_kind["metric"], state=by_kind["state"],
        python=tuple(loaded_python), files=tuple(files),
        version=f"{len(rules)}-{digest.hexdigest()[:12]}",
    )
    return issues, pack


def lint_rule_pack(paths: Sequence[Path] | None = None) -> list[RuleIssue]:
    """Every problem in the rule files at ``paths`` (default: the bundled ``rules/``).

    A path may be a file or a folder (every ``*.yaml``/``*.yml`` in it, sorted).
    """
    return _collect(paths)[0]


def load_rule_pack(paths: Sequence[Path] | None = None) -> RulePack:
    """The validated rule pack at ``paths`` (default: the bundled ``rules/``).

    Raises :class:`RulePackError` listing every problem when there is any.
    """
    issues, pack = _collect(paths)
    if issues:
        raise RulePackError(issues)
    return pack
