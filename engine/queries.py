"""Trend queries over the lake: DuckDB SQL files in ``queries/``, run by name.

Each ``queries/<name>.sql`` file starts with a header comment that is also its contract::

    -- purpose: one line: what the query answers
    -- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
    -- param k: INTEGER = 2 -- how many attempts make a repeat offender
    -- column day: UTC day of the event
    -- (free text lines explain definitions)

The SQL refers to its parameters as DuckDB named prepared-statement parameters
(``$since``, ``$k``…). A parameter not given on the command line takes its header default;
``NULL`` means "no bound" and the SQL must handle it (``$since IS NULL OR day >= $since``).

Every lake table is a DuckDB view over
``read_parquet('<lake>/<table>/**/*.parquet', hive_partitioning = true)`` with the partition
columns (``cluster``, ``day``, ``source``) as typed columns. A table that has not landed yet
is an empty view with the same columns, so every query runs on any lake.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from ingest.schema import PARTITIONS, TABLES

QUERIES_DIR = Path(__file__).resolve().parents[1] / "queries"

FORMATS = ("table", "csv", "json", "parquet")

_HIVE_TYPES = {"cluster": "VARCHAR", "day": "DATE", "source": "VARCHAR"}
_PARTITION_ARROW = {"cluster": pa.string(), "day": pa.date32(), "source": pa.string()}

_PARAM_TYPES = {
    "DATE": date.fromisoformat,
    "INTEGER": int,
    "DOUBLE": float,
    "VARCHAR": str,
}
"""Header parameter types and how a command-line string becomes a value of each."""

_PURPOSE = re.compile(r"^--\s*purpose:\s*(?P<text>.+?)\s*$")
_PARAM = re.compile(
    r"^--\s*param\s+(?P<name>[a-z_][a-z0-9_]*)\s*:\s*(?P<type>[A-Z]+)\s*=\s*(?P<default>\S+)"
    r"\s*(?:--\s*(?P<doc>.*?))?\s*$"
)
_COLUMN = re.compile(r"^--\s*column\s+(?P<name>\w+)\s*:\s*(?P<doc>.+?)\s*$")


class QueryError(ValueError):
    """A query file, its parameters or its output request is wrong; the message says how to fix it."""


@dataclass(frozen=True)
class Param:
    """One declared query parameter: name, SQL type, default (``None`` for NULL), meaning."""

    name: str
    type: str
    default: object
    doc: str


@dataclass(frozen=True)
class QuerySpec:
    """A query file parsed: its name, purpose, parameters, documented columns and SQL."""

    name: str
    path: Path
    purpose: str
    params: tuple[Param, ...]
    columns: tuple[str, ...]
    sql: str


def _convert(value: str, type_name: str, where: str) -> object:
    try:
        return _PARAM_TYPES[type_name](value)
    except (ValueError, TypeError):
        raise QueryError(f"{where}: '{value}' is not a {type_name}"
                         + (" — write YYYY-MM-DD" if type_name == "DATE" else "")) from None


def parse_query_file(path: Path) -> QuerySpec:
    """Parse a ``queries/*.sql`` header; errors name the file and line."""
    text = path.read_text()
    purpose, params, columns = None, [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.startswith("--"):
            if line.strip():
                break
            continue
        where = f"{path}:{lineno}"
        if m := _PURPOSE.match(line):
            purpose = m["text"]
        elif line.replace(" ", "").startswith("--param"):
            m = _PARAM.match(line)
            if not m:
                raise QueryError(f"{where}: bad param line — write '-- param name: TYPE = default -- meaning'")
            if m["type"] not in _PARAM_TYPES:
                raise QueryError(f"{where}: unknown param type '{m['type']}' — use one of {sorted(_PARAM_TYPES)}")
            default = None if m["default"] == "NULL" else _convert(m["default"], m["type"], where)
            params.append(Param(m["name"], m["type"], default, m["doc"] or ""))
        elif m := _COLUMN.match(line):
            columns.append(m["name"])
    if purpose is None:
        raise QueryError(f"{path}: the header has no '-- purpose: …' line — add one")
    return QuerySpec(path.stem, path, purpose, tuple(params), tuple(columns), text)


def load_queries(directory: Path = QUERIES_DIR) -> dict[str, QuerySpec]:
    """Every query of a folder, by name (the file stem)."""
    return {p.stem: parse_query_file(p) for p in sorted(directory.glob("*.sql"))}


def catalog(directory: Path = QUERIES_DIR) -> pl.DataFrame:
    """The bundled queries: name, purpose and parameters with their defaults."""
    specs = load_queries(directory).values()
    return pl.DataFrame(
        {
            "name": [s.name for s in specs],
            "purpose": [s.purpose for s in specs],
            "params": [
                ", ".join(f"{p.name}={'NULL' if p.default is None else p.default}" for p in s.params)
                for s in specs
            ],
        },
        schema={"name": pl.String, "purpose": pl.String, "params": pl.String},
    )


def parse_params(items: list[str]) -> dict[str, str]:
    """``["k=3", "since=2026-11-28"]`` → ``{"k": "3", "since": "2026-11-28"}``.

    Values stay strings here; :func:`run_query` converts them to the types the query's
    header declares.
    """
    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise QueryError(f"--param '{item}' is not k=v — write e.g. --param since=2026-11-28")
        if key in params:
            raise QueryError(f"--param {key} is given twice — keep one")
        params[key] = value.strip()
    return params


def bind_params(spec: QuerySpec, given: dict[str, object]) -> dict[str, object]:
    """The full parameter set of a query: given values (converted) over header defaults."""
    declared = {p.name: p for p in spec.params}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise QueryError(f"query '{spec.name}' has no parameter {unknown} — "
                         f"its parameters are {sorted(declared) or 'none'}")
    bound = {}
    for name, param in declared.items():
        value = given.get(name, param.default)
        if isinstance(value, str) and param.type != "VARCHAR":
            value = None if value.upper() == "NULL" else _convert(value, param.type, f"--param {name}")
        bound[name] = value
    return bound


def _empty_arrow(table: str) -> pa.Table:
    schema = TABLES[table]
    for key in PARTITIONS[table]:
        schema = schema.append(pa.field(key, _PARTITION_ARROW[key]))
    return schema.empty_table()


def connect(lake: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per lake table (empty if not landed)."""
    lake = Path(lake)
    if not lake.is_dir():
        raise QueryError(f"lake {lake} does not exist — run 'causelake demo --lake {lake}' or land data first")
    con = duckdb.connect()
    for table in TABLES:
        base = lake / table
        if base.is_dir() and any(base.rglob("*.parquet")):
            hive = ", ".join(f"'{k}': {_HIVE_TYPES[k]}" for k in PARTITIONS[table])
            pattern = str(base / "**" / "*.parquet").replace("'", "''")
            con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}', "
                f"hive_partitioning = true, hive_types = {{{hive}}}, union_by_name = true)"
            )
        else:
            con.register(f"_empty_{table}", _empty_arrow(table))
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")
    return con


def run_query(lake: Path, name: str, params: dict, directory: Path = QUERIES_DIR) -> pl.DataFrame:
    """Run query ``name`` over ``lake`` with ``params`` (strings or typed values)."""
    specs = load_queries(directory)
    if name not in specs:
        raise QueryError(f"no query '{name}' in {directory} — 'causelake query --list' shows {sorted(specs)}")
    spec = specs[name]
    bound = bind_params(spec, params)
    con = connect(lake)
    try:
        return pl.from_arrow(con.sql(spec.sql, params=bound).to_arrow_table())
    except duckdb.Error as exc:
        raise QueryError(f"query '{name}' ({spec.path}) failed: {exc}") from exc
    finally:
        con.close()


def write(frame: pl.DataFrame, fmt: str, output: Path | None, console) -> None:
    """Write a query result as ``table`` (rich, to ``console``), ``csv``, ``json`` (an
    array of row objects) or ``parquet`` (needs ``output``), to ``output`` or stdout."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown format '{fmt}' — use one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if output is None:
            raise QueryError("parquet output is binary — give -o FILE.parquet")
        frame.write_parquet(output)
        return
    if fmt == "table":
        from rich.console import Console

        from engine.render import summary_table

        table = summary_table(frame, f"{frame.height} rows")
        if output is None:
            console.print(table)
            return
        with Path(output).open("w") as fh:
            Console(file=fh, width=240).print(table)
        return
    elif fmt == "csv":
        text = _flatten_lists(frame).write_csv()
    else:
        text = frame.write_json()
        text += "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        Path(output).write_text(text)


def _flatten_lists(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV has no lists: join list columns with ``;``."""
    return frame.with_columns(
        pl.col(c).cast(pl.List(pl.String)).list.join(";")
        for c, t in frame.schema.items() if isinstance(t, pl.List)
    )
