"""Slurm hostlist expressions: expand ``gpu[001-004,007]`` into node names and back.

Expansion follows what ``scontrol show hostnames`` prints:

* hosts are separated by commas, spaces, tabs or newlines outside brackets; empty entries
  (``a,,b``) are skipped;
* a bracket holds a comma-separated list of numbers and ``lo-hi`` ranges, expanded in the
  order written, duplicates kept (``n[3,1-2,1]`` → n3 n1 n2 n1);
* numbers are zero-padded to the width of the lower bound as written (``n[08-11]`` →
  n08..n11, ``n[8-11]`` → n8..n11, ``n[1-010]`` → n1..n10);
* several brackets in one name multiply out, the leftmost bracket varying slowest
  (``rack[1-2]-node[01-02]`` → rack1-node01, rack1-node02, rack2-node01, rack2-node02);
* text may follow the last bracket (``gpu-a[1-2]-ib`` → gpu-a1-ib, gpu-a2-ib). Slurm 22.05
  rejects such a trailing suffix; node names in context files use it, so it is accepted here.

Slurm is lenient with some malformed input (it tacks a ``]`` onto an unclosed bracket and
reads ``n[1-]`` as ``n1``); here every malformed expression raises :class:`ValueError`
naming the expression and the 0-based position of the problem, because a silently wrong
node list misattributes every node event of the attempt.
"""

from __future__ import annotations

import itertools
import re

import polars as pl

MAX_RANGE = 64 * 1024
"""Most hosts one ``lo-hi`` range may hold; Slurm's ``MAX_RANGE`` has the same value."""

MAX_HOSTS = 1024 * 1024
"""Most hosts one expression may expand to, so a typo cannot exhaust memory."""

_SEPARATORS = frozenset(", \t\n")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_TRAILING_NUMBER = re.compile(r"(.*?)(\d+)")


def _fail(expr: str, pos: int, problem: str, fix: str) -> ValueError:
    return ValueError(f"invalid hostlist {expr!r} at position {pos}: {problem} — {fix}")


def _tokens(expr: str) -> list[tuple[int, str]]:
    """Split at top-level separators; returns (start offset, token), checking brackets."""
    tokens: list[tuple[int, str]] = []
    start = 0
    opened = -1
    for pos, char in enumerate(expr):
        if char == "[":
            if opened >= 0:
                raise _fail(expr, pos, "'[' inside a bracket", "brackets cannot nest")
            opened = pos
        elif char == "]":
            if opened < 0:
                raise _fail(expr, pos, "']' without a matching '['", "remove it or add the '['")
            opened = -1
        elif char in _SEPARATORS and opened < 0:
            if pos > start:
                tokens.append((start, expr[start:pos]))
            start = pos + 1
    if opened >= 0:
        raise _fail(expr, opened, "'[' is never closed", "add the closing ']'")
    if len(expr) > start:
        tokens.append((start, expr[start:]))
    return tokens


def _bracket_values(expr: str, offset: int, body: str) -> list[str]:
    """The formatted numbers of one bracket body starting at ``offset`` in ``expr``."""
    values: list[str] = []
    pos = offset
    for item in body.split(","):
        match = _RANGE.fullmatch(item)
        if match is None:
            what = "an empty range" if not item else f"invalid range {item!r}"
            raise _fail(expr, pos, what, "write a number or lo-hi with digits only, e.g. [1-4,7]")
        lo_text, hi_text = match.groups()
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise _fail(
                expr, pos, f"descending range {item}",
                f"write the lower bound first: {hi_text}-{lo_text}",
            )
        if hi - lo + 1 > MAX_RANGE:
            raise _fail(
                expr, pos, f"range {item} holds more than {MAX_RANGE} hosts",
                "split the expression or check the bounds",
            )
        width = len(lo_text)
        values.extend(f"{n:0{width}d}" for n in range(lo, hi + 1))
        pos += len(item) + 1
    return values


def _expand_token(expr: str, start: int, token: str) -> list[str]:
    """Expand one host or bracketed host pattern (brackets already known to balance)."""
    parts: list[list[str]] = []
    cursor = 0
    while (open_at := token.find("[", cursor)) >= 0:
        close_at = token.index("]", open_at)
        parts.append([token[cursor:open_at]])
        body_start = start + open_at + 1
        parts.append(_bracket_values(expr, body_start, token[open_at + 1:close_at]))
        cursor = close_at + 1
    parts.append([token[cursor:]])
    total = 1
    for values in parts:
        total *= len(values)
    if total > MAX_HOSTS:
        raise _fail(
            expr, start, f"{token!r} expands to {total} hosts (limit {MAX_HOSTS})",
            "check the ranges",
        )
    return ["".join(combo) for combo in itertools.product(*parts)]


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into node names, in Slurm's order.

    ``"gpu[001-002],cpu7"`` → ``["gpu001", "gpu002", "cpu7"]``. Duplicates are kept.
    Raises :class:`ValueError` for an empty expression, unbalanced or nested brackets, a
    descending or non-numeric range, or an expansion past :data:`MAX_HOSTS`; the message
    names the expression and the 0-based position of the problem.
    """
    if not expr or not expr.strip():
        raise ValueError(
            f"invalid hostlist {expr!r}: it is empty — give at least one node name, e.g. gpu[001-004]"
        )
    hosts: list[str] = []
    for start, token in _tokens(expr):
        hosts.extend(_expand_token(expr, start, token))
        if len(hosts) > MAX_HOSTS:
            raise _fail(expr, start, f"expands to more than {MAX_HOSTS} hosts", "check the ranges")
    return hosts


def compress_hostlist(nodes: list[str]) -> str:
    """Write node names as a compact hostlist, for display; the inverse of expansion.

    Order is preserved, as ``scontrol show hostlist`` does: consecutive names that share a
    prefix before their trailing number go into one bracket, runs of consecutive numbers of
    the same zero padding become ``lo-hi`` (``n08,n9,n10`` → ``n[08,9-10]``).
    ``expand_hostlist(compress_hostlist(nodes)) == nodes`` for any non-empty list.
    Raises :class:`ValueError` for an empty list or a name that cannot appear in a hostlist
    (empty, or containing brackets, commas or whitespace).
    """
    if not nodes:
        raise ValueError("compress_hostlist: no node names given — pass at least one")
    groups: list[tuple[str | None, list[list]]] = []
    for name in nodes:
        if not name or any(c in name for c in "[]") or any(c in _SEPARATORS for c in name):
            raise ValueError(
                f"compress_hostlist: {name!r} is not a node name — "
                "names cannot be empty or contain brackets, commas or whitespace"
            )
        match = _TRAILING_NUMBER.fullmatch(name)
        if match is None:
            groups.append((None, [[name]]))
            continue
        prefix, digits = match.groups()
        number = int(digits)
        if groups and groups[-1][0] == prefix:
            items = groups[-1][1]
            lo_text, hi, count = items[-1]
            if number == hi + 1 and f"{number:0{len(lo_text)}d}" == digits:
                items[-1] = [lo_text, number, count + 1]
            else:
                items.append([digits, number, 1])
        else:
            groups.append((prefix, [[digits, number, 1]]))
    out = []
    for prefix, items in groups:
        if prefix is None:
            out.append(items[0][0])
            continue
        if len(items) == 1 and items[0][2] == 1:
            out.append(prefix + items[0][0])
            continue
        ranges = [
            lo if count == 1 else f"{lo}-{hi:0{len(lo)}d}" for lo, hi, count in items
        ]
        out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)


def expand_hostlist_column(s: pl.Series) -> pl.Series:
    """Expand a column of hostlist expressions into a ``list[str]`` column.

    Each distinct expression is expanded once and mapped back onto the column (a sacct dump
    repeats the same node list thousands of times). Nulls stay null. Raises
    :class:`ValueError` (from :func:`expand_hostlist`) for the first invalid expression.
    """
    values = s.cast(pl.String).alias("expr")
    distinct = values.drop_nulls().unique(maintain_order=True)
    mapping = pl.DataFrame({
        "expr": distinct,
        "nodes": pl.Series([expand_hostlist(v) for v in distinct], dtype=pl.List(pl.String)),
    })
    joined = values.to_frame().join(mapping, on="expr", how="left", maintain_order="left")
    return joined["nodes"].alias(s.name)


def short_host(host: pl.Expr) -> pl.Expr:
    """A host name as schedulers name nodes: ``gpu-fq03.cluster.internal`` → ``gpu-fq03``,
    lower case, as the lake keeps every node name (:meth:`ingest.lake.Lake.land`, whatever
    the source: Kubernetes names EKS nodes ``ip-10-42-40-222.us-east-2.compute.internal``
    where their journal says ``ip-10-42-40-222``).

    A central rsyslog server (or ``$PreserveFQDN on``) writes the fully qualified name,
    while Slurm's NodeName is the short one (``hostname -s``): without this, no kernel
    line of such a log would attach to a job. Addresses (``10.0.0.5``) stay whole.
    """
    # Most names hold no dot: only those reach the regex (a capture costs ten times a
    # literal search).
    dotted = pl.when(host.str.contains(".", literal=True)).then(host)
    return pl.coalesce(dotted.str.replace(r"^([A-Za-z][A-Za-z0-9_-]*)\..*$", "$1"), host).str.to_lowercase()
