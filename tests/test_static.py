"""The static execution-context connector: YAML, JSON and CSV files → attempts."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from ingest.lake import Lake
from ingest.schema import ATTEMPTS
from ingest.static import FIELDS, ContextError, land_static_context, read_static_context
from ingest.states import SLURM_STATES

BAD_INPUTS = Path(__file__).parent / "bad_inputs" / "static"

# file in tests/bad_inputs/static → the fragment its ContextError must contain.
EXPECTED_ERRORS = {
    "bad_exit_code.yaml": "bad_exit_code.yaml:6: exit_code: exit code 'segfault' is not code or code:signal",
    "bad_hostlist.csv": "bad_hostlist.csv:2: nodes: invalid hostlist 'gpu[004-001]' at position 4: "
                        "descending range 004-001 — write the lower bound first: 001-004",
    "bad_timestamp.yaml": "bad_timestamp.yaml:4: start: bad timestamp '2026-13-45T10:00:00Z' — write ISO 8601",
    "context.toml": "context.toml: unknown extension '.toml' — name the file .yml / .yaml / .json / .csv",
    "date_without_time.yaml": "date_without_time.yaml:4: end: bad timestamp '2026-11-28'",
    "duplicate_attempt.yaml": "duplicate_attempt.yaml:6: attempt_id: attempt id 'static/demo/1001/0' "
                              "repeats the row at",
    "duplicate_key.yaml": "duplicate_key.yaml:6: the attempt repeats the key 'state' — keep one",
    "end_before_start.json": "end_before_start.json: attempts[0]: end: ends before it starts "
                             "(2026-11-28T09:00:00Z < 2026-11-28T10:00:00Z) — fix start or end",
    "flow_list_unquoted.yaml": "flow_list_unquoted.yaml:6: YAML syntax error",
    "json_syntax.json": "json_syntax.json:4: JSON syntax error",
    "missing_cluster.csv": "missing_cluster.csv:2: cluster: missing — add `cluster:`",
    "missing_job_id.yaml": "missing_job_id.yaml:3: job_id: missing — add job_id:",
    "negative_index.yaml": "negative_index.yaml:4: attempt_index: input should be greater than or equal to 0",
    "no_attempts.yaml": "no_attempts.yaml: no attempts — add at least one attempt",
    "no_timestamp.yaml": "no_timestamp.yaml:3: start: no timestamp — give at least one of submit, start, end",
    "unclosed_bracket.yaml": "unclosed_bracket.yaml:6: nodes: invalid hostlist 'gpu[001-004' at position 3: "
                             "'[' is never closed",
    "unknown_column.csv": "unknown_column.csv:1: stat: unknown column — did you mean 'state'?",
    "unknown_key.yaml": "unknown_key.yaml:5: stat: unknown key — did you mean 'state'?",
    "unknown_state.yaml": "unknown_state.yaml:5: state: unknown state 'EXPLODED' — use a Slurm state",
    "unknown_top_level.yaml": "unknown_top_level.yaml:2: atempts: unknown top-level key — "
                              "did you mean 'attempts'?",
    "yaml_syntax.yaml": "yaml_syntax.yaml:5: YAML syntax error",
}

YAML_CONTEXT = """\
cluster: demo
attempts:
  - job_id: "1001"
    job_name: llama-pretrain
    user: alice
    partition: gpu
    submit: 2026-11-28T09:58:00Z
    start: 2026-11-28T10:00:00Z
    end: 2026-11-28T11:32:10Z
    state: FAILED
    exit_code: "1:0"
    nodes: "gpu[001-004]"
    ranks_per_node: 8
    gpus_per_node: 8
  - job_id: "1001"
    attempt_index: 1
    job_name: llama-pretrain
    start: 2026-11-28T23:50:00
    end: 2026-11-29T02:10:00+02:00
    state: CANCELLED by 1000
    exit_code: 0:15
    nodes:
      - "gpu[005-006]"
      - cpu7
  - job_id: 77
    cluster: lab
    attempt_id: lab-run-77
    end: 2026-11-27T08:00:00Z
    state: Succeeded
"""

JSON_CONTEXT = {
    "cluster": "demo",
    "attempts": [
        {"job_id": "1001", "job_name": "llama-pretrain", "user": "alice", "partition": "gpu",
         "submit": "2026-11-28T09:58:00Z", "start": "2026-11-28T10:00:00Z",
         "end": "2026-11-28T11:32:10Z", "state": "FAILED", "exit_code": "1:0",
         "nodes": "gpu[001-004]", "ranks_per_node": 8, "gpus_per_node": 8},
        {"job_id": "1001", "attempt_index": 1, "job_name": "llama-pretrain",
         "start": "2026-11-28T23:50:00", "end": "2026-11-29T02:10:00+02:00",
         "state": "CANCELLED by 1000", "exit_code": "0:15", "nodes": ["gpu[005-006]", "cpu7"]},
        {"job_id": 77, "cluster": "lab", "attempt_id": "lab-run-77",
         "end": "2026-11-27T08:00:00Z", "state": "Succeeded"},
    ],
}

CSV_CONTEXT = """\
job_id,attempt_index,attempt_id,cluster,job_name,user,partition,submit,start,end,state,exit_code,nodes,ranks_per_node,gpus_per_node
1001,0,,,llama-pretrain,alice,gpu,2026-11-28T09:58:00Z,2026-11-28T10:00:00Z,2026-11-28T11:32:10Z,FAILED,1:0,gpu[001-004],8,8
1001,1,,,llama-pretrain,,,,2026-11-28T23:50:00,2026-11-29T02:10:00+02:00,CANCELLED by 1000,0:15,"gpu[005-006],cpu7",,
77,,lab-run-77,lab,,,,,,2026-11-27T08:00:00Z,Succeeded,,,,
"""


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


@pytest.fixture(params=["yaml", "json", "csv"])
def context_file(request, tmp_path) -> Path:
    path = tmp_path / f"context.{request.param}"
    if request.param == "yaml":
        path.write_text(YAML_CONTEXT)
    elif request.param == "json":
        path.write_text(json.dumps(JSON_CONTEXT, indent=2))
    else:
        path.write_text(CSV_CONTEXT)
    return path


def test_every_format_gives_the_same_attempts(context_file):
    # CSV has no file-level cluster: the caller gives the default.
    frame = read_static_context(context_file, cluster="demo")
    assert frame.columns == [*ATTEMPTS.names, "cluster"]
    assert frame.schema == pl.Schema(
        {**pl.from_arrow(ATTEMPTS.empty_table()).schema, "cluster": pl.String}
    )
    rows = frame.drop("origin").to_dicts()
    assert rows[0] == {
        "attempt_id": "static/demo/1001/0", "scheduler": "static", "job_id": "1001",
        "job_name": "llama-pretrain", "user": "alice", "partition": "gpu", "attempt_index": 0,
        "submit_ts": _utc(2026, 11, 28, 9, 58), "start_ts": _utc(2026, 11, 28, 10),
        "end_ts": _utc(2026, 11, 28, 11, 32, 10), "raw_state": "FAILED", "state": "failed",
        "exit_code": 1, "signal": 0, "nodes": ["gpu001", "gpu002", "gpu003", "gpu004"],
        "n_nodes": 4, "ranks_per_node": 8, "gpus_per_node": 8, "relaunch_ts": None, "cluster": "demo",
    }
    # Naive times are UTC; offsets are converted to UTC.
    assert rows[1]["start_ts"] == _utc(2026, 11, 28, 23, 50)
    assert rows[1]["end_ts"] == _utc(2026, 11, 29, 0, 10)
    assert rows[1]["attempt_id"] == "static/demo/1001/1"
    assert (rows[1]["state"], rows[1]["exit_code"], rows[1]["signal"]) == ("cancelled", 0, 15)
    assert rows[1]["nodes"] == ["gpu005", "gpu006", "cpu7"]
    assert (rows[2]["attempt_id"], rows[2]["cluster"], rows[2]["job_id"]) == ("lab-run-77", "lab", "77")
    assert rows[2]["state"] == "completed" and rows[2]["nodes"] == [] and rows[2]["n_nodes"] == 0


def test_a_byte_order_mark_is_ignored(context_file):
    """Excel's "CSV UTF-8" starts the file with one: it made the first column unknown."""
    plain = read_static_context(context_file, cluster="demo")
    context_file.write_bytes(b"\xef\xbb\xbf" + context_file.read_bytes())
    assert read_static_context(context_file, cluster="demo").equals(plain)


def test_origin_points_at_the_row(tmp_path):
    yaml_file = tmp_path / "ctx.yaml"
    yaml_file.write_text(YAML_CONTEXT)
    csv_file = tmp_path / "ctx.csv"
    csv_file.write_text(CSV_CONTEXT)
    json_file = tmp_path / "ctx.json"
    json_file.write_text(json.dumps(JSON_CONTEXT))
    assert read_static_context(yaml_file)["origin"].to_list() == [
        f"{yaml_file}:3", f"{yaml_file}:15", f"{yaml_file}:25",
    ]
    assert read_static_context(csv_file, cluster="demo")["origin"].to_list() == [
        f"{csv_file}:2", f"{csv_file}:3", f"{csv_file}:4",
    ]
    assert read_static_context(json_file)["origin"].to_list() == [
        f"{json_file}:attempts[{i}]" for i in range(3)
    ]


def test_yaml_values_are_read_as_written(tmp_path):
    # YAML 1.1 would read 1:0 as the base-60 number 60 and 0012 as octal 10.
    path = tmp_path / "ctx.yml"
    path.write_text(
        "cluster: demo\nattempts:\n  - job_id: 0012\n    start: 2026-11-28T10:00:00Z\n"
        "    state: FAILED\n    exit_code: 1:0\n"
    )
    row = read_static_context(path).row(0, named=True)
    assert (row["job_id"], row["exit_code"], row["signal"]) == ("0012", 1, 0)


def test_cluster_precedence(tmp_path):
    path = tmp_path / "ctx.yaml"
    path.write_text(
        "attempts:\n  - {job_id: '1', end: '2026-11-28T10:00:00Z', state: FAILED}\n"
        "  - {job_id: '2', end: '2026-11-28T10:00:00Z', state: FAILED, cluster: row}\n"
    )
    assert read_static_context(path, cluster="arg")["cluster"].to_list() == ["arg", "row"]
    path.write_text("cluster: file\n" + path.read_text())
    assert read_static_context(path, cluster="arg")["cluster"].to_list() == ["file", "row"]


def test_land_is_idempotent(context_file, tmp_path):
    lake = Lake(tmp_path / "lake")
    first = land_static_context(lake, context_file, cluster="demo")
    assert first["read"] == first["attempts"] == 3
    assert first["clusters"] == {"demo": 2, "lab": 1}
    landed = lake.scan("attempts").collect().sort("attempt_id")
    assert landed.height == 3
    assert sorted(landed["day"].cast(pl.String).to_list()) == ["2026-11-27", "2026-11-28", "2026-11-29"]
    files = sorted(p.relative_to(lake.root) for p in lake.files("attempts"))

    second = land_static_context(lake, context_file, cluster="demo")
    assert second == first
    assert sorted(p.relative_to(lake.root) for p in lake.files("attempts")) == files
    assert lake.scan("attempts").collect().sort("attempt_id").equals(landed)


def test_every_problem_is_reported_at_once(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text(
        "cluster: demo\nattempts:\n"
        "  - job_id: '1'\n    start: 2026-11-28T10:00:00Z\n    end: 2026-11-28T09:00:00Z\n"
        "    state: FAILED\n"
        "  - job_id: '2'\n    start: yesterday\n    state: FAILED\n"
        "  - job_id: '3'\n    start: 2026-11-28T10:00:00Z\n    state: BOOM\n"
    )
    with pytest.raises(ContextError) as info:
        read_static_context(path)
    message = str(info.value)
    assert message.startswith(f"cannot read execution context {path}: 3 problems")
    assert f"{path}:5: end: ends before it starts" in message
    assert f"{path}:8: start: bad timestamp 'yesterday'" in message
    assert f"{path}:12: state: unknown state 'BOOM'" in message


def test_problems_of_every_kind_are_reported_in_one_round(tmp_path):
    """The file's shape, each field, then checks across fields and rows: each kind was
    reported only once the kinds before it were fixed, so a file took several rounds."""
    path = tmp_path / "rounds.yaml"
    path.write_text(
        "cluster: demo\nclustre: lab\nattempts:\n"
        "  - job_id: '1'\n    start: 2026-11-28T10:00:00Z\n    end: 2026-11-28T09:00:00Z\n"
        "    state: FAILED\n    gpus: 8\n"
        "  - job_id: '2'\n    end: 2026-11-28T11:00:00Z\n    state: BOOM\n    exit_code: segv\n"
        "    state: FAILED\n"
        "  - job_id: '1'\n    start: yesterday\n    end: 2026-11-28T12:00:00Z\n    state: COMPLETED\n"
    )
    with pytest.raises(ContextError) as info:
        read_static_context(path)
    assert str(info.value).splitlines() == [
        f"cannot read execution context {path}: 8 problems",
        f"  {path}:2: clustre: unknown top-level key — did you mean 'cluster'? allowed keys: cluster, attempts",
        f"  {path}:13: the attempt repeats the key 'state' — keep one",
        f"  {path}:8: gpus: unknown key — allowed keys: {', '.join(FIELDS)}",
        f"  {path}:12: exit_code: exit code 'segv' is not code or code:signal — write e.g. \"1:0\" or 1",
        f"  {path}:15: start: bad timestamp 'yesterday' — write ISO 8601 date and time, "
        "e.g. 2026-11-28T10:00:00Z (naive times are UTC)",
        f"  {path}:11: state: unknown state 'BOOM' — use a Slurm state ({', '.join(sorted(SLURM_STATES))}) "
        "or a Kueue one (Succeeded, Failed, Evicted)",
        f"  {path}:6: end: ends before it starts (2026-11-28T09:00:00Z < 2026-11-28T10:00:00Z) — fix start or end",
        f"  {path}:14: attempt_id: attempt id 'static/demo/1/0' repeats the row at {path}:4 "
        "— give each attempt its own job_id/attempt_index or attempt_id",
    ]


def test_a_csv_header_and_its_rows_are_checked_in_one_round(tmp_path):
    path = tmp_path / "rounds.csv"
    path.write_text("job_id,stat,state,end\n1,x,BOOM,2026-11-28T11:00:00Z\n2,x,FAILED,\n")
    with pytest.raises(ContextError) as info:
        read_static_context(path, cluster="demo")
    message = str(info.value)
    assert message.startswith(f"cannot read execution context {path}: 3 problems")
    assert f"{path}:1: stat: unknown column — did you mean 'state'?" in message
    assert f"{path}:2: state: unknown state 'BOOM'" in message
    assert f"{path}:3: start: no timestamp" in message


def test_missing_file_is_a_context_error(tmp_path):
    lake = Lake(tmp_path / "lake")
    with pytest.raises(ContextError, match="nowhere.yaml: no such file — check the path"):
        land_static_context(lake, tmp_path / "nowhere.yaml")
    assert not (tmp_path / "lake").exists()


def test_bad_input_table_covers_the_folder():
    assert sorted(p.name for p in BAD_INPUTS.iterdir()) == sorted(EXPECTED_ERRORS)


@pytest.mark.parametrize(("name", "fragment"), EXPECTED_ERRORS.items())
def test_bad_inputs_fail_cleanly_and_land_nothing(name, fragment, tmp_path):
    lake = Lake(tmp_path / "lake")
    with pytest.raises(ContextError) as info:
        land_static_context(lake, BAD_INPUTS / name)
    assert isinstance(info.value, ValueError)
    assert fragment in str(info.value)
    assert lake.files("attempts") == []
