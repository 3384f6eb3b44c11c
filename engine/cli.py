"""The ``causelake`` command line: thin commands over library functions.

Every command parses its options, calls one library function and prints. Expected errors
(bad input, a bad rule file, a lake problem) print one line to stderr and exit 2; the
traceback only appears with ``--debug``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, date, datetime
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import polars as pl
import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from engine import render

if TYPE_CHECKING:  # the CLI imports the engine lazily, command by command (fast --help)
    from engine.rules.loader import RulePack
    from ingest.lake import Lake

app = typer.Typer(
    help="Explain why distributed GPU training jobs failed, from a columnar log lake.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)
ingest_app = typer.Typer(
    help="Land inputs into the lake (subcommands), or run the nightly ingest of a config file.",
    invoke_without_command=True,
)
rules_app = typer.Typer(help="Check the rule pack.", no_args_is_help=True)
app.add_typer(ingest_app, name="ingest")
bench_app = typer.Typer(help="Accuracy and performance benchmarks on a simulated fleet.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")
app.add_typer(bench_app, name="bench")

# Outside a terminal (pipes, CI logs) rich would wrap at 80 columns; verdict tables need more.
# Node names, PCI addresses and log lines are data: no emoji codes (``0000:ab:00``).
out = Console(width=None if sys.stdout.isatty() else 200, emoji=False)
# Messages quote log lines and hostlists (``gpu[001-004]``): never read them as markup.
err = Console(stderr=True, markup=False, highlight=False, emoji=False)
STATE = {"debug": False}

LakeOpt = Annotated[Path, typer.Option("--lake", help="Lake directory.", file_okay=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object per line instead of tables.")]
SourceOpt = Annotated[
    str | None,
    typer.Option("--source", help="Force the format: syslog, journald, kmsg, app, kubectl (default: detect per file)."),
]
TIMEZONE_HELP = "IANA zone of stamps without one (RFC 3164, glog, dmesg -T), e.g. America/Chicago."
TimezoneOpt = Annotated[str, typer.Option("--timezone", help=TIMEZONE_HELP)]


def _expected_errors() -> tuple[type[BaseException], ...]:
    from engine.rules.loader import RulePackError
    from ingest.config import ConfigError
    from ingest.connectors.base import ConnectorError
    from ingest.lake import LakeError

    return (ValueError, OSError, LakeError, RulePackError, ConnectorError, ConfigError)


def handle_errors(fn: Callable) -> Callable:
    """One error handler for every command: one clear line and exit 2 on expected errors."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _expected_errors() as exc:
            if STATE["debug"]:
                raise
            err.print(Text.assemble(("error:", "red"), f" {exc}"), soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


@app.callback()
def main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False) -> None:
    """causelake: root causes of failed GPU training attempts."""
    STATE["debug"] = debug


def _progress() -> tuple[Progress, Callable[[str], None]]:
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    task = progress.add_task("working", total=None)
    return progress, lambda msg: progress.update(task, description=msg)


def _print_ingest(counts) -> None:
    err.print(f"read {counts.read} lines, landed {counts.landed}, rejected {counts.rejected}"
              + (f"; {counts.attempts} attempts" if counts.attempts else ""))


def _print_summary(summary, results: pl.DataFrame, json_out: bool, title: str = "verdicts") -> None:
    if json_out:
        sys.stdout.write(render.to_jsonl(render.verdict_records(results, json_mode=True)))
        return
    out.print(render.verdict_table(results, title=f"{title} ({summary.run_id})"))
    out.print(render.summary_table(summary.by_domain_quality(), "attempts by domain and quality"))


def _day_window(day: date | None, since: date | None, until: date | None) -> tuple[date, date]:
    if day and (since or until):
        raise ValueError("give either --day or --since/--until, not both")
    if day:
        return day, day
    if since and until:
        if until < since:
            raise ValueError(f"--until {until} is before --since {since}")
        return since, until
    raise ValueError("give --day D or both --since D and --until D (UTC days, YYYY-MM-DD)")


def _parse_day(value: str | None, name: str) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{name} '{value}' is not a day — write YYYY-MM-DD") from None


@app.command()
@handle_errors
def demo(
    lake: Annotated[Path | None, typer.Option("--lake", help="Keep the lake here instead of a temporary one.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Land the bundled sample fleet, attribute every attempt, print the verdicts."""
    from engine.oneshot import SAMPLES, run_demo
    from engine.run import landing_lake

    with tempfile.TemporaryDirectory(prefix="causelake-demo-") as tmp:
        target = landing_lake(lake or tmp)
        progress, say = _progress()
        with progress:
            counts, summary = run_demo(target, SAMPLES, progress=say)
        _print_ingest(counts)
        _print_summary(summary, summary.verdicts, json_out)
        if lake:
            err.print(f"lake kept at {lake}")


def _print_connector_reports(reports) -> bool:
    """One line per connector report, then its warnings; True when every connector succeeded."""
    for r in reports:
        status = "ok" if r.ok else f"FAILED{' (transient)' if r.transient else ''}: {r.error}"
        err.print(f"{r.connector} [{r.cluster}]: fetched {r.fetched}, landed {r.landed}, "
                  f"rejected {r.rejected} — {status}", soft_wrap=True)
        for warning in r.warnings:
            err.print(f"warning: {warning}")
    return all(r.ok for r in reports)


@ingest_app.callback()
@handle_errors
def ingest_nightly(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", help="lake.yaml: clusters → connectors.")] = None,
    day: Annotated[str | None, typer.Option("--day", help="UTC day to ingest (YYYY-MM-DD).")] = None,
) -> None:
    """Without a subcommand: run every connector of ``--config`` for ``--day``."""
    if ctx.invoked_subcommand is not None:
        return
    if config is None or day is None:
        err.print(ctx.get_help())
        raise ValueError("give --config lake.yaml --day YYYY-MM-DD, or a subcommand")
    from engine.run import landing_derivations
    from ingest.config import ingest_from_config

    reports = ingest_from_config(config, _parse_day(day, "--day"), derivations=landing_derivations())
    if not _print_connector_reports(reports):
        raise typer.Exit(1)


@ingest_app.command("slurm")
@handle_errors
def ingest_slurm(
    lake: LakeOpt,
    cluster: Annotated[str, typer.Option("--cluster", help="Cluster the accounting belongs to.")],
    sacct_file: Annotated[
        list[Path] | None, typer.Option("--sacct-file", help="Saved sacct --parsable2/--json output (repeatable).")
    ] = None,
    since: Annotated[datetime | None, typer.Option("--since", help="Window start (UTC) for a live sacct call.")] = None,
    until: Annotated[datetime | None, typer.Option("--until", help="Window end (UTC, exclusive).")] = None,
    timezone_name: Annotated[
        str | None, typer.Option("--timezone", help="IANA zone of the Slurm host's times (default: this machine's).")
    ] = None,
) -> None:
    """Land attempts from Slurm accounting: saved sacct output, or one live sacct call."""
    from ingest.connectors import record_ingest, run_connector
    from ingest.connectors.base import FetchWindow
    from ingest.connectors.slurm import SlurmConnector, SlurmOptions, local_timezone
    from ingest.lake import Lake

    if bool(sacct_file) == bool(since or until):
        raise ValueError("give either --sacct-file FILE… or --since T --until T")
    if not sacct_file and not (since and until):
        raise ValueError("a live sacct call needs both --since and --until")
    window = None
    if since and until:
        utc = [t if t.tzinfo else t.replace(tzinfo=UTC) for t in (since, until)]
        window = FetchWindow(start=utc[0], end=utc[1])
    options = SlurmOptions(sacct_file=sacct_file or [], timezone=timezone_name)
    target = Lake(lake)
    report = run_connector(target, SlurmConnector(options, cluster), window)
    record_ingest(target, window, [report])
    if not _print_connector_reports([report]):
        raise typer.Exit(1)
    if timezone_name is None:
        # The Slurm host's zone is guessed: say which, since every window moves with it.
        err.print(f"sacct times read as {local_timezone()} (this machine's zone); give --timezone for the Slurm host's")


@ingest_app.command("topology")
@handle_errors
def ingest_topology(
    lake: LakeOpt,
    cluster: Annotated[str, typer.Option("--cluster", help="Cluster the topology belongs to.")],
    hca_ports: Annotated[
        Path | None, typer.Option("--hca-ports", help="CSV/YAML: node, hca, port, switch, switch_port[, pci].")
    ] = None,
    gpus: Annotated[Path | None, typer.Option("--gpus", help="CSV/YAML: node, gpu, pci.")] = None,
    ibnetdiscover: Annotated[Path | None, typer.Option("--ibnetdiscover", help="ibnetdiscover output.")] = None,
    aliases: Annotated[
        Path | None, typer.Option("--aliases", help="CSV/YAML: node, alias (another name the node's logs use).")
    ] = None,
) -> None:
    """Land the fabric topology (host port ↔ switch port, GPU index ↔ PCI address) and the
    other names nodes' logs use: it has no day, and landing it again replaces its rows by
    key. Land aliases before the logs that use them."""
    from ingest.connectors import run_connector
    from ingest.connectors.topology import TopologyConnector, TopologyOptions
    from ingest.lake import Lake

    options = TopologyOptions(hca_ports_file=hca_ports, gpus_file=gpus, ibnetdiscover_file=ibnetdiscover,
                              aliases_file=aliases)
    report = run_connector(Lake(lake), TopologyConnector(options, cluster), None)
    if not _print_connector_reports([report]):
        raise typer.Exit(1)


@ingest_app.command("static")
@handle_errors
def ingest_static(
    file: Annotated[Path, typer.Argument(help="Attempts as YAML, JSON or CSV.")],
    lake: LakeOpt,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster for rows and files that name none.")
    ] = None,
) -> None:
    """Land attempts from a static execution-context file."""
    from ingest.lake import Lake
    from ingest.static import land_static_context

    report = land_static_context(Lake(lake), file, cluster=cluster)
    per_cluster = ", ".join(f"{c}: {n}" for c, n in sorted(report["clusters"].items()))
    err.print(f"landed {report['attempts']} attempts from {file} ({per_cluster})")


@ingest_app.command("files")
@handle_errors
def ingest_files(
    paths: Annotated[list[Path], typer.Argument(help="Log files or folders (recursed).")],
    lake: LakeOpt,
    cluster: Annotated[str, typer.Option("--cluster", help="Cluster the logs belong to.")],
    source: SourceOpt = None,
    node: Annotated[str | None, typer.Option("--node", help="Node for files that name no host.")] = None,
    node_pattern: Annotated[str | None, typer.Option(
        "--node-pattern", help="Regex whose first group finds the node in each file's path (instead of --node).",
    )] = None,
    attempt: Annotated[str | None, typer.Option("--attempt", help="Tie every line to this attempt id.")] = None,
    year: Annotated[int | None, typer.Option("--year", help="Year of RFC 3164 stamps (default: file mtime).")] = None,
    boot_time: Annotated[
        datetime | None, typer.Option("--boot-time", help="Boot time for dmesg monotonic stamps (UTC).")
    ] = None,
    timezone: Annotated[str | None, typer.Option("--timezone", help=f"{TIMEZONE_HELP} Default UTC.")] = None,
) -> None:
    """Land local log files (syslog, journald JSON, dmesg, app logs, kubectl logs)."""
    from engine.oneshot import IngestCounts
    from engine.run import landing_lake
    from ingest.files import land_log_files

    counts = IngestCounts()
    report = land_log_files(landing_lake(lake), paths, cluster=cluster, source=source, node=node,
                            node_pattern=node_pattern, attempt_id=attempt, year=year, boot_time=boot_time,
                            timezone=timezone or "UTC")
    counts.add_files(report)
    _print_ingest(counts)
    if timezone is None and report.zoneless:
        # A site's nodes often log local time: a wrong zone moves every line hours off its job.
        err.print("stamps without a zone were read as UTC; land the files again with --timezone "
                  "if their hosts log another zone")
    # An output whose job is not in the lake yet lands tied to nothing: landing the
    # accounting first, not --node, is the fix.
    untied = {file.path for file in report.untied_outputs()} if attempt is None else set()
    for file in report.flagged():
        if file.rejected and not file.landed:
            err.print(f"warning: {file.path}: every line was rejected as {file.source} (see the rejects table); "
                      "what an earlier landing of it gave is kept — check --source")
        if file.unplaced and file.path not in untied:
            err.print(f"warning: {file.path}: {file.unplaced} of {file.landed} lines ({file.source}) name no node and "
                      "tie to no attempt, so no verdict can see them — land the file again with --node, "
                      "--node-pattern or --attempt")
    for path in sorted(untied):
        err.print(f"warning: {path}: the lake has no attempt of this output's job yet, so its lines are tied to "
                  "none — land the Slurm accounting first, then this file again")
    # Lines a later run of the job wrote, landed before that run's accounting: tied to the
    # run before it until the file is landed again.
    for file in report.outlasting_outputs() if attempt is None else ():
        err.print(f"warning: {file.path}: {file.outlasting} of {file.landed} lines are stamped more than an hour "
                  f"after {', '.join(file.attempt_ids)} ended, so a later run of the job wrote them — land that "
                  "run's Slurm accounting, then this file again")
    cut = report.cut_files()
    for file in cut:
        err.print(f"error: {file.path}: gzip data cut short or corrupt ({file.cut}); its {file.read} lines before "
                  "the damage landed — re-copy the file and land it again")
    if cut:
        raise typer.Exit(1)


@app.command()
@handle_errors
def run(
    lake: LakeOpt,
    day: Annotated[str | None, typer.Option("--day", help="Attribute attempts that ended on this UTC day.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="First UTC day of the window.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Last UTC day of the window (included).")] = None,
    cluster: Annotated[list[str] | None, typer.Option("--cluster", help="Only these clusters.")] = None,
    show: Annotated[int, typer.Option("--show", help="Failed attempts to list (the latest); the JSON has all.", min=0)] = 50,
    stale: Annotated[bool, typer.Option(
        "--stale", help="Only the days of the window whose verdicts are older than their inputs or rules.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Attribute attempts, replace their verdicts in results/, write a run manifest."""
    from engine.rules.loader import load_rule_pack
    from engine.stale import spans, stale_days
    from ingest.lake import Lake

    first, last = _day_window(_parse_day(day, "--day"), _parse_day(since, "--since"), _parse_day(until, "--until"))
    if not (Path(lake) / "attempts").is_dir():
        # A typo'd path would otherwise become an empty lake, and the run a silent no-op.
        raise ValueError(f"{lake}: no attempts landed here; check --lake, or land attempts first "
                         "(causelake ingest slurm / static)")
    the_lake, pack = Lake(lake), load_rule_pack()
    windows = [(first, last)]
    if stale:
        # Runs of consecutive stale days, one run each: the days between keep their verdicts.
        days = stale_days(the_lake, first, last, pack_version=pack.version, clusters=cluster or None)
        err.print(f"{len(days)} of the window's days have stale verdicts"
                  + (f": {', '.join(d.isoformat() for d in days)}" if days else " — nothing to attribute"))
        windows = spans(days)
    for first, last in windows:
        _attribute_window(the_lake, first, last, pack, cluster, show, json_out)


def _attribute_window(
    lake: Lake, first: date, last: date, pack: RulePack, cluster: list[str] | None, show: int, json_out: bool,
) -> None:
    """One run over ``[first, last]`` and its printed summary (see :func:`run`)."""
    from engine.run import run_attribution

    progress, say = _progress()
    with progress:
        summary = run_attribution(lake, first, last, pack=pack, clusters=cluster or None, progress=say)
    if summary.unended:
        by_state = ", ".join(f"{n} {state}" for state, n in summary.unended.items())
        err.print(f"skipped {sum(summary.unended.values())} attempts without an end time ({by_state}): "
                  "an attempt is attributed once a later scheduler record says when it ended")
    if json_out:
        _print_summary(summary, summary.verdicts, json_out)
        return
    # A nightly window holds tens of thousands of attempts: list the latest failures only.
    failures = summary.latest_failures(show)
    failed = int(summary.by_domain_quality().filter(pl.col("domain") != "none")["attempts"].sum())
    _print_summary(summary, failures, json_out, title="failed attempts, latest last")
    if failed > failures.height:
        err.print(f"{failures.height} of {failed} failed attempts listed (--show N for more); "
                  "`causelake explain ID` shows one, `causelake results` exports all")


@app.command()
@handle_errors
def explain(
    attempt_id: Annotated[str, typer.Argument(help="The attempt to explain.")],
    lake: LakeOpt,
    json_out: JsonOpt = False,
) -> None:
    """Show one attempt's verdict and its evidence as a timeline."""
    from ingest.lake import Lake

    results = Lake(lake).scan("results").filter(pl.col("attempt_id") == attempt_id).collect()
    if results.is_empty():
        raise ValueError(f"no verdict for '{attempt_id}' in {lake} — run 'causelake run' over its day first")
    if json_out:
        sys.stdout.write(render.to_jsonl(render.verdict_records(results, json_mode=True)))
        return
    for record in render.verdict_records(results):
        render.print_explanation(out, record)


@app.command()
@handle_errors
def diagnose(
    paths: Annotated[list[Path], typer.Argument(help="Log files or folders of one failed job.")],
    context: Annotated[Path | None, typer.Option("--context", help="Static context file of the attempts.")] = None,
    source: SourceOpt = None,
    year: Annotated[int | None, typer.Option("--year", help="Year of RFC 3164 stamps.")] = None,
    boot_time: Annotated[datetime | None, typer.Option("--boot-time", help="Boot time for dmesg stamps.")] = None,
    timezone: TimezoneOpt = "UTC",
    json_out: JsonOpt = False,
) -> None:
    """One-shot: land the files into a temporary lake and print the verdict."""
    from engine.oneshot import diagnose as run_diagnose
    from engine.run import landing_lake

    with tempfile.TemporaryDirectory(prefix="causelake-diagnose-") as tmp:
        counts, summary = run_diagnose(landing_lake(tmp), paths, context=context, source=source,
                                       year=year, boot_time=boot_time, timezone=timezone)
        if not json_out:
            _print_ingest(counts)
        if json_out:
            sys.stdout.write(render.to_jsonl(render.verdict_records(summary.verdicts, json_mode=True)))
            return
        for record in render.verdict_records(summary.verdicts):
            render.print_explanation(out, record)


@app.command()
@handle_errors
def extract(
    paths: Annotated[list[Path], typer.Argument(help="Log files or folders.")],
    source: SourceOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The events each line yields under the rule pack (quick way to test a log)."""
    from engine.extract import extract_lines_from_files
    from engine.rules.loader import load_rule_pack

    events = extract_lines_from_files(paths, load_rule_pack(), source=source)
    columns = ["ts", "node", "rank", "source", "rule_id", "event", "domain", "cause", "role",
               "gpu", "port", "params", "message", "origin"]
    if json_out:
        sys.stdout.write(render.to_jsonl(events.select(columns).to_dicts()))
        return
    table = render.summary_table(
        events.select("origin", "rule_id", "domain", "cause", "role", pl.col("message").str.slice(0, 100)),
        f"{events.height} events",
    )
    out.print(table)


@rules_app.command("lint")
@handle_errors
def rules_lint(
    paths: Annotated[list[Path] | None, typer.Argument(help="Rule files or folders (default: bundled pack).")] = None,
) -> None:
    """Validate every rule file; report every error at once (exit 1 if any)."""
    from engine.rules.loader import lint_rule_pack

    issues = lint_rule_pack(paths or None)
    for issue in issues:
        err.print(str(issue), soft_wrap=True)
    if issues:
        err.print(f"{len(issues)} error(s)")
        raise typer.Exit(1)
    err.print("rule pack is clean")


@rules_app.command("test")
@handle_errors
def rules_test(
    paths: Annotated[list[Path] | None, typer.Argument(help="Rule files or folders (default: bundled pack).")] = None,
) -> None:
    """Run every rule's inline tests (lines that must hit, near-misses that must not)."""
    from engine.rules.loader import load_rule_pack
    from engine.rules.testing import run_inline_tests

    results = run_inline_tests(load_rule_pack(paths or None))
    failed = [r for r in results if not r.ok]
    for r in failed:
        err.print(f"FAIL {r.rule_id}: {r.case}: {r.message}", soft_wrap=True)
    err.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    if failed:
        raise typer.Exit(1)


@app.command()
@handle_errors
def query(
    name: Annotated[str | None, typer.Argument(help="Query name (a file in queries/).")] = None,
    lake: Annotated[Path | None, typer.Option("--lake", help="Lake directory.", file_okay=False)] = None,
    param: Annotated[list[str] | None, typer.Option("--param", help="Query parameter k=v.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or parquet.")] = "table",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here (parquet needs it).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the bundled queries.")] = False,
) -> None:
    """Run a trend query over the lake (DuckDB SQL from queries/)."""
    from engine import queries

    if list_ or name is None:
        out.print(render.summary_table(queries.catalog(), "queries"))
        return
    if lake is None:
        raise ValueError("give --lake DIR")
    frame = queries.run_query(lake, name, queries.parse_params(param or []))
    queries.write(frame, fmt, output, out)


@app.command()
@handle_errors
def simulate(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the raw inputs and truth.")],
    attempts: Annotated[int, typer.Option("--attempts", help="Attempts to simulate.", min=1)] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same bytes).")] = 0,
) -> None:
    """Write a simulated fleet in real formats plus its ground truth."""
    from benchmarks.simulate import simulate as run_simulation

    report = run_simulation(out_dir, attempts, seed=seed)
    err.print(f"{report.attempts} attempts, {report.lines} lines in {report.files} files under {report.out}")


@bench_app.command("accuracy")
@handle_errors
def bench_accuracy(
    out_file: Annotated[Path, typer.Option("--out", help="Write the figures here (JSON).")],
    attempts: Annotated[int, typer.Option("--attempts", help="Attempts to simulate.", min=10)] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
) -> None:
    """Simulate → ingest → attribute → score against the truth (and the real incidents)."""
    from benchmarks.accuracy import bench_accuracy as run_accuracy

    figures = run_accuracy(attempts, seed, out_file)
    keys = ("domain_accuracy", "cause_accuracy", "culprit_node_precision", "culprit_node_recall",
            "culprit_node_f1", "ambiguous_flagged")
    out.print(render.summary_table(pl.DataFrame([{k: figures.get(k) for k in keys}]), f"accuracy ({out_file})"))


@bench_app.command("perf")
@handle_errors
def bench_perf(
    attempts: Annotated[int, typer.Option("--attempts", help="Attempts to simulate.", min=10)],
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the figures here (JSON).")] = None,
) -> None:
    """Time every stage (simulate, ingest, extract, correlate, decide, write)."""
    import json

    from benchmarks.perf import bench_perf as run_perf

    figures = run_perf(attempts, out_file)
    sys.stdout.write(json.dumps(figures, indent=2, sort_keys=True, default=str) + "\n")


@app.command()
@handle_errors
def report(
    lake: LakeOpt,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")],
    since: Annotated[str | None, typer.Option("--since", help="First UTC day (default: all).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Last UTC day (default: all).")] = None,
) -> None:
    """Write one self-contained HTML report: trends, heat maps, per-attempt timelines."""
    from engine.report import write_report

    path = write_report(lake, output, _parse_day(since, "--since"), _parse_day(until, "--until"))
    err.print(f"report written to {path}")


@app.command()
@handle_errors
def results(
    lake: LakeOpt,
    day: Annotated[str | None, typer.Option("--day", help="UTC day of the attempts' end.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="First UTC day of the attempts' end.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Last UTC day of the attempts' end (included).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="Export format (jsonl).")] = "jsonl",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
) -> None:
    """Export the verdicts of a day or a window of days for incident systems (schema:
    schemas/verdict.schema.json)."""
    from engine.export import export_results

    first, last = _day_window(_parse_day(day, "--day"), _parse_day(since, "--since"), _parse_day(until, "--until"))
    text = export_results(lake, first, fmt, until=last)
    if output:
        output.write_text(text)
        err.print(f"{text.count(chr(10))} verdicts written to {output}")
    else:
        sys.stdout.write(text)


@rules_app.command("catalog")
@handle_errors
def rules_catalog() -> None:
    """Print the cause catalog (every cause code the pack can produce) as Markdown."""
    from engine.rules.catalog import catalog_markdown
    from engine.rules.loader import load_rule_pack

    sys.stdout.write(catalog_markdown(load_rule_pack()))
