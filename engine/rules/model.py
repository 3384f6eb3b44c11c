"""Strict models of the rule pack: what a rule file may say.

A rule file is YAML with one top-level key, ``rules:``, holding a list of rules. Each rule
is one of the kinds below, chosen by its ``kind`` field (a discriminated union):

``extract``
    Turns matching log lines into events: literal ``prefilter`` strings (any must occur),
    then a ``regex`` with named groups, then the event's ``domain``/``cause``/``role``.
    ``map`` makes these depend on a named group (one rule for every XID code).
``suppress``
    Events matching ``cascade`` that follow an event matching ``root`` within ``window``
    in the same ``scope`` are cascades of that root (role becomes ``cascade``).
``precedence``
    When events matching ``prefer`` and ``over`` occur in the same scope within ``window``,
    the ``over`` events confirm the preferred one (role becomes ``confirmation``).
``metric``
    A condition over a metric series (counter increase, threshold, state change) emits an
    event.
``state``
    What a scheduler state means when the logs say nothing (TIMEOUT → time limit).
``python``
    Logic YAML cannot express, loaded by path (see :mod:`engine.rules.python_rules`).

Checks that need the rule's YAML positions or another engine (``map.key`` is a named
group, test ``expect`` fields exist, ``subject_node`` has a ``node`` group and
``subject_rank`` a ``rank`` group, the regex also
compiles in Polars' Rust engine, rule ids are unique, python rule files exist) live in
:mod:`engine.rules.loader`, which reports them at the right file and line.

Reserved named groups fill the event's location columns: ``gpu`` (PCI address or index),
``port`` (HCA port, ``mlx5_0:1`` or ``mlx5_0/1``), ``rank``, ``node`` (a hostname printed in
the message: it fills in for a line whose writer is unknown, and wins over the writer when
the rule says ``subject_node``; likewise ``rank`` with ``subject_rank``). Every other named
group is kept in the event's ``params``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from ingest.schema import DOMAINS, ROLES

Role = Literal["root_candidate", "cascade", "confirmation", "context", "benign"]
Domain = Literal[
    "gpu", "gpu_memory", "nvlink", "network", "host", "storage", "scheduler", "workload",
    "unknown", "none",
]
Scope = Literal["attempt", "node", "gpu", "port"]

ACTIONS = (
    "none", "restart", "fix_workload", "drain_node_and_restart", "reset_gpu_and_restart",
    "replace_gpu", "check_fabric_port", "check_nvlink", "check_storage", "check_host",
    "increase_time_limit", "resubmit", "investigate",
)
"""Recommended actions a rule may name (the verdict's ``recommended_action``)."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str | int | float) -> float:
    """Seconds in a duration like ``30s``, ``40m``, ``2h`` (a bare number is seconds)."""
    if isinstance(text, int | float):
        return float(text)
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"'{text}' is not a duration — write e.g. 30s, 40m, 2h")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def _valid_duration(text: str) -> str:
    parse_duration(text)
    return text


Duration = Annotated[str, AfterValidator(_valid_duration)]
"""A duration field (``30s``, ``40m``, ``2h``), checked when the rule is loaded."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Outcome(_Strict):
    """What an event means: its name, domain, cause code, role and recommended action."""

    event: str | None = None
    domain: Domain | None = None
    cause: str | None = None
    role: Role | None = None
    action: Literal[ACTIONS] | None = None  # type: ignore[valid-type]
    title: str | None = None
    names_node: Literal["always", "alone", "one_node", "never"] | None = None
    """Whether a root from this outcome names its node (and GPU, port) as a culprit:
    ``always`` (the default); ``never`` when the fault is not the node's (the job's own
    cgroup memory limit, a quota); ``alone`` when the line reports a shared service (a file
    server): the node is named while it is the only one reporting it, and none is once
    several of the attempt's nodes, or other nodes within minutes, report it (the service is
    at fault, not the nodes); ``one_node`` when the fault may lie in a component several
    nodes share (a multi-node NVLink domain's switch trays): the node is named while the
    root's incident (its reports within the clock skew) is on one node, and none is when it
    struck several of the attempt's nodes at once."""
    passes: bool | None = None
    """The fault passes by itself (a driver resets a transmit queue that timed out, a
    resolver answers the next query, a full kernel table drops packets only while it is
    full): an attempt that went on working long after such a root, and has another root
    after it, did not die of it (:func:`engine.relabel.demote_outlived_roots`). Unset means
    false; a map entry inherits its rule's value."""

    @field_validator("cause")
    @classmethod
    def _cause_shape(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", v):
            raise ValueError(f"cause '{v}' must look like <domain>.<name>, e.g. gpu.fallen_off_bus")
        return v


class ParamMap(_Strict):
    """Outcome by the value of one named group, e.g. XID code → cause/domain/role."""

    key: str | list[str]
    """The named group whose value picks the outcome; a list names several, and the first
    that matched picks it (a specific group that only some lines fill, before the general one)."""
    table: dict[str, Outcome]
    default: Outcome | None = None
    """Outcome for values not in ``table``; without it such lines are not events."""

    @field_validator("table", mode="before")
    @classmethod
    def _keys_as_text(cls, v: object) -> object:
        # YAML reads `79:` as an int; group values are always text.
        if isinstance(v, dict):
            return {str(k) if isinstance(k, int | float) else k: val for k, val in v.items()}
        return v

    @property
    def keys(self) -> list[str]:
        """The groups of ``key``, in the order they are tried."""
        return [self.key] if isinstance(self.key, str) else list(self.key)


class HitCase(_Strict):
    """A real line the rule must match, with the fields it must yield."""

    line: str
    ref: str = Field(description="where the line was seen (URL)")
    expect: dict[str, str] = Field(default_factory=dict)

    @field_validator("expect", mode="before")
    @classmethod
    def _values_as_text(cls, v: object) -> object:
        # `code: 79` or `rank: 3` in YAML are numbers; extracted values are compared as text.
        if isinstance(v, dict):
            return {
                k: str(val) if isinstance(val, int | float) and not isinstance(val, bool) else val
                for k, val in v.items()
            }
        return v


class MissCase(_Strict):
    """A near-miss line the rule must not match."""

    line: str
    ref: str | None = None


class ExtractTests(_Strict):
    hit: list[HitCase] = Field(min_length=1)
    miss: list[MissCase] = Field(min_length=1)


class ExtractRule(Outcome):
    """Log line → event (see the module docstring)."""

    kind: Literal["extract"]
    id: str
    title: str
    sources: list[str] | None = None
    prefilter: list[str] = Field(min_length=1)
    regex: str
    ignore_case: bool = False
    subject_node: bool = False
    """The ``node`` group names the node the line is about, which wins over the host that
    wrote it: slurmctld's ``Nodes gpu-d03 not responding`` is about gpu-d03 whether its log
    came from the controller's syslog or was landed with ``--node``."""
    subject_rank: bool = False
    """The ``rank`` group names the rank the line is about, which wins over the rank that
    printed it: a healthy rank's report naming the rank that never joined (PyTorch's desync
    report, Gloo's monitored barrier). The event's node is then unknown (that rank's, not
    the writer's)."""
    map: ParamMap | None = None
    dedupe_window: Duration = "5m"
    tests: ExtractTests
    event: str
    domain: Domain
    cause: str
    role: Role
    action: Literal[ACTIONS] = "none"  # type: ignore[valid-type]

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(
                f"regex does not compile in Python re: {exc} — fix the pattern"
            ) from exc
        return v


class Selector(_Strict):
    """Which events a suppress/precedence rule talks about; all given lists must match."""

    events: list[str] | None = None
    domains: list[Domain] | None = None
    roles: list[Role] | None = None
    causes: list[str] | None = None
    rules: list[str] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> Selector:
        if not any((self.events, self.domains, self.roles, self.causes, self.rules)):
            raise ValueError("a selector needs at least one of events, domains, roles, causes, rules")
        return self


class SuppressRule(_Strict):
    """Events matching ``cascade`` after a ``root`` event are symptoms of it."""

    kind: Literal["suppress"]
    id: str
    title: str
    root: Selector
    cascade: Selector
    scope: Scope = "attempt"
    window: Duration
    before: Duration = "0s"
    """How long before the root a cascade may be stamped and still count (clock skew)."""



class PrecedenceRule(_Strict):
    """When ``prefer`` and ``over`` meet in one scope and window, ``over`` confirms."""

    kind: Literal["precedence"]
    id: str
    title: str
    prefer: Selector
    over: Selector
    scope: Scope = "attempt"
    window: Duration
    ahead: Duration | None = None
    """How long after ``over`` (its latest possible moment) ``prefer`` may come and still
    outrank it; ``window`` when unset. A GPU's XID explains the CUDA error its process then
    hits, not one the process hit before the driver saw anything."""
    spans: bool = True
    """Whether an unstamped line counts anywhere in its span (up to the next stamped line of
    its file) when matching the window; ``false`` compares only the stamps the lines read or
    inherited: for lines printed together, as a traceback and the error it wraps, whose
    spans would reach an unrelated event minutes later."""



class MetricCase(_Strict):
    """Samples ``[[seconds, value], …]`` of one series and how many events they give."""

    samples: list[tuple[float, float]]
    events: int
    ref: str | None = None


class MetricRule(Outcome):
    """A condition over a metric series emits an event."""

    kind: Literal["metric"]
    id: str
    title: str
    metrics: list[str] = Field(min_length=1)
    """Series names; several when exporters renamed the metric across versions."""
    condition: Literal["increase", "above", "below", "change"]
    threshold: float = 0.0
    dedupe_window: Duration = "5m"
    tests: list[MetricCase] = Field(min_length=1)
    event: str
    domain: Domain
    cause: str
    role: Role
    action: Literal[ACTIONS] = "none"  # type: ignore[valid-type]



class StateRule(Outcome):
    """What an attempt's normalized scheduler state means when the logs say nothing.

    The engine turns every ended attempt into a scheduler-record event stamped at its end.
    It is a fallback root (used only when no log line offers a root candidate) and a
    corroboration when a log root has the same cause (``DUE TO TIME LIMIT`` + ``TIMEOUT``).
    """

    kind: Literal["state"]
    id: str
    title: str
    states: list[
        Literal["failed", "cancelled", "timeout", "node_fail", "preempted", "out_of_memory",
                "boot_fail", "deadline"]
    ] = Field(min_length=1)
    event: str
    domain: Domain
    cause: str
    role: Role = "root_candidate"
    action: Literal[ACTIONS] = "none"  # type: ignore[valid-type]
    agrees_with: list[str] = Field(default_factory=list)
    """Causes of a log root, besides ``cause``, that the state corroborates: Slurm records
    ``REQUEUED`` (normalized to ``preempted``) for a preemption and for an ``scontrol
    requeue`` alike, so slurmstepd's ``DUE TO JOB REQUEUE`` agrees with it."""


class PythonRule(_Strict):
    """A rule written in Python, in a file beside the YAML (path relative to it)."""

    kind: Literal["python"]
    id: str
    title: str
    path: str


Rule = Annotated[
    ExtractRule | SuppressRule | PrecedenceRule | MetricRule | StateRule | PythonRule,
    Field(discriminator="kind"),
]


class RuleFile(_Strict):
    """The top level of a rule file."""

    rules: list[Rule]


assert set(Domain.__args__) == set(DOMAINS) and set(Role.__args__) == set(ROLES)  # type: ignore[attr-defined]
