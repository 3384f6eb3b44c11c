"""Trend queries (queries/*.sql) on the sample fleet, checked against independent Polars
computations over the same lake (read with ``Lake.scan``, not DuckDB)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from rich.console import Console

from engine import queries
from engine.oneshot import SAMPLES, run_demo
from ingest.lake import Lake

FAILED = ~pl.col("state").is_in(["completed", "running"])


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory) -> Lake:
    """The sample fleet landed and attributed by the real pipeline (read-only in tests)."""
    lake = Lake(tmp_path_factory.mktemp("queries-lake"))
    run_demo(lake, SAMPLES)
    return lake


def _hours(end: str, start: str) -> pl.Expr:
    return (pl.col(end) - pl.col(start)).dt.total_microseconds() / 3.6e9


def _same(got: pl.DataFrame, want: pl.DataFrame, keys: list[str]) -> None:
    assert got.height > 0, "the query returned nothing on the sample fleet"
    assert_frame_equal(
        got.select(want.columns).sort(keys, nulls_last=True),
        want.sort(keys, nulls_last=True),
        check_dtypes=False, check_exact=False, rel_tol=1e-9,
    )


def _failed_with_attempts(lake: Lake) -> pl.DataFrame:
    results = lake.scan("results").filter(FAILED).collect()
    attempts = lake.scan("attempts").select("cluster", "attempt_id", "nodes", "n_nodes", "gpus_per_node",
                                            pl.col("start_ts").alias("a_start"), pl.col("end_ts").alias("a_end"))
    return results.join(attempts.collect(), on=["cluster", "attempt_id"], how="left")


def test_catalog_lists_every_query_with_its_purpose():
    cat = queries.catalog()
    expected = {"xid_daily", "port_hotspots", "failures_by_domain", "repeat_offenders",
                "mtbf_by_node_class", "explain_gaps"}
    assert expected <= set(cat["name"])
    assert cat["purpose"].str.len_chars().min() > 10
    for spec in queries.load_queries().values():
        assert spec.columns, f"{spec.path}: the header documents no output column"


def test_every_query_returns_its_documented_columns(sample_lake):
    for name, spec in queries.load_queries().items():
        frame = queries.run_query(sample_lake.root, name, {})
        assert frame.columns == list(spec.columns), name


def test_every_query_runs_on_an_empty_lake(tmp_path):
    for name, spec in queries.load_queries().items():
        frame = queries.run_query(tmp_path, name, {})
        assert frame.height == 0 and frame.columns == list(spec.columns), name


def test_xid_daily_matches_polars_and_the_raw_lines(sample_lake):
    got = queries.run_query(sample_lake.root, "xid_daily", {})
    events = sample_lake.scan("events").collect().with_columns(
        xid=pl.col("params").str.json_path_match("$.xid").cast(pl.Int64)
    ).filter(pl.col("xid").is_not_null())
    keys = ["day", "cluster", "node", "gpu", "xid"]
    placed = sample_lake.scan("attempts").collect().explode("nodes").select(
        "cluster", pl.col("nodes").alias("node"), pl.col("attempt_id").alias("running"), "start_ts", "end_ts")
    running = events.join(placed, on=["cluster", "node"]).filter(
        pl.col("ts") >= pl.col("start_ts"), (pl.col("ts") <= pl.col("end_ts")) | pl.col("end_ts").is_null()
    ).select(*keys, attempt=pl.col("running"))
    struck = pl.concat([running, events.select(*keys, attempt=pl.col("attempt_id"))]).drop_nulls("attempt") \
        .group_by(keys).agg(attempts=pl.col("attempt").n_unique())
    want = events.group_by(keys).agg(events=pl.len(), occurrences=pl.col("count").sum()) \
        .join(struck, on=keys, how="left", nulls_equal=True).with_columns(pl.col("attempts").fill_null(0))
    _same(got, want, keys)
    # The kernel's XID lines belong to no attempt, yet each struck the attempts running there.
    assert events["attempt_id"].is_null().any() and got["attempts"].min() >= 1
    # Every NVRM XID line of the sample logs is counted once, floods included.
    raw = sum(p.read_text().count("NVRM: Xid") for p in (SAMPLES / "nodes").rglob("*") if p.is_file())
    assert got["occurrences"].sum() == raw
    fallen = got.filter(pl.col("node") == "gpu003", pl.col("xid") == 79)
    assert fallen.select("day", "gpu").rows() == [(date(2026, 11, 28), "0000:3a:00")]


def test_xid_daily_filters_by_day_and_cluster(sample_lake):
    day = {"since": "2026-11-29", "until": "2026-11-29"}
    assert set(queries.run_query(sample_lake.root, "xid_daily", day)["day"]) == {date(2026, 11, 29)}
    assert queries.run_query(sample_lake.root, "xid_daily", {"cluster": "nope"}).height == 0


def test_failures_by_domain_matches_polars(sample_lake):
    failed = _failed_with_attempts(sample_lake).with_columns(
        hours=_hours("end_ts", "start_ts"),
        n=pl.coalesce("n_nodes", pl.col("nodes").list.len()),
    )
    for grain, period in (("day", pl.col("day")), ("week", pl.col("day").dt.truncate("1w"))):
        got = queries.run_query(sample_lake.root, "failures_by_domain", {"grain": grain})
        want = failed.group_by(period.alias("period"), "cluster", "domain", "cause").agg(
            failures=pl.len(),
            lost_node_hours=(pl.col("hours") * pl.col("n")).sum(),
            lost_gpu_hours=(pl.col("hours") * pl.col("n") * pl.col("gpus_per_node")).sum(),
            gpu_hours_after_fault=(pl.col("fault_to_end_s").fill_null(0) / 3600 * pl.col("n")
                                   * pl.col("gpus_per_node")).sum(),
        )
        _same(got, want, ["period", "cluster", "domain", "cause"])
    # 13 of the 20 sample attempts did not complete; 1007 ran 2 nodes x 8 GPUs for 4 h.
    assert got["failures"].sum() == 13
    timeouts = got.filter(pl.col("cause") == "scheduler.time_limit")
    assert timeouts["lost_gpu_hours"].sum() == pytest.approx((4 + 9 / 3600) * 16)


def test_failures_by_domain_rejects_an_unknown_grain(sample_lake):
    with pytest.raises(queries.QueryError, match="grain must be day or week"):
        queries.run_query(sample_lake.root, "failures_by_domain", {"grain": "month"})


@pytest.mark.parametrize("k", [1, 2])
def test_repeat_offenders_matches_polars(sample_lake, k):
    got = queries.run_query(sample_lake.root, "repeat_offenders", {"k": str(k), "days": "7"})
    results = sample_lake.scan("results").filter(FAILED).collect()
    end = results["day"].max()
    scoped = results.filter(pl.col("day") > end - timedelta(days=7)).filter(
        ~pl.col("evidence").list.eval(pl.element().struct.field("rule_id") == "fleet.systemic").list.any())
    nodes = scoped.explode("culprit_nodes").filter(pl.col("culprit_nodes").is_not_null()).select(
        kind=pl.lit("node"), cluster="cluster", node="culprit_nodes", gpu=pl.lit(None, pl.String),
        attempt_id="attempt_id")
    gpus = scoped.with_columns(
        node=pl.when(pl.col("culprit_nodes").list.len() == 1).then(pl.col("culprit_nodes").list.first())
    ).explode("culprit_gpus").filter(pl.col("culprit_gpus").is_not_null()).select(
        kind=pl.lit("gpu"), cluster="cluster", node="node", gpu="culprit_gpus", attempt_id="attempt_id")
    want = pl.concat([nodes, gpus]).group_by("kind", "cluster", "node", "gpu").agg(
        attempts=pl.col("attempt_id").n_unique()).filter(pl.col("attempts") >= k)
    if want.height == 0:
        assert got.height == 0
        return
    _same(got, want, ["kind", "cluster", "node", "gpu"])
    assert (got["window_end"] == end).all()


def test_repeat_offenders_window_excludes_older_days(sample_lake):
    got = queries.run_query(sample_lake.root, "repeat_offenders",
                            {"k": "1", "days": "1", "until": "2026-11-29"})
    assert set(got["window_start"]) == {date(2026, 11, 29)}
    assert "gpu003" not in got["node"].to_list()  # blamed on 2026-11-28 only


def test_mtbf_by_node_class_matches_polars(sample_lake):
    got = queries.run_query(sample_lake.root, "mtbf_by_node_class", {})
    service = sample_lake.scan("attempts").collect().filter(
        pl.col("start_ts").is_not_null(), pl.col("end_ts").is_not_null()
    ).with_columns(hours=_hours("end_ts", "start_ts")).explode("nodes").with_columns(
        node_class=pl.col("nodes").str.replace(r"[-_]?[0-9]+$", ""))
    per_class = service.group_by("cluster", "node_class").agg(
        nodes=pl.col("nodes").n_unique(), attempts=pl.col("attempt_id").n_unique(),
        node_hours=pl.col("hours").sum())
    blamed = sample_lake.scan("results").filter(FAILED, pl.col("responsibility") == "infrastructure") \
        .collect().explode("culprit_nodes").filter(pl.col("culprit_nodes").is_not_null()) \
        .with_columns(node_class=pl.col("culprit_nodes").str.replace(r"[-_]?[0-9]+$", "")) \
        .group_by("cluster", "node_class").agg(failures=pl.col("attempt_id").n_unique())
    want = per_class.join(blamed, on=["cluster", "node_class"], how="left").with_columns(
        pl.col("failures").fill_null(0)).with_columns(
        mtbf_hours=pl.when(pl.col("failures") > 0).then(pl.col("node_hours") / pl.col("failures")))
    _same(got, want, ["cluster", "node_class"])
    assert got["node_class"].to_list() == ["gpu"]
    assert got["nodes"].item() == 16


def test_explain_gaps_matches_polars(sample_lake):
    got = queries.run_query(sample_lake.root, "explain_gaps", {})
    want = sample_lake.scan("results").filter(FAILED).collect().group_by("day", "cluster").agg(
        failures=pl.len(),
        **{q: (pl.col("quality") == q).sum() for q in ("definitive", "probable", "ambiguous", "insufficient")},
        gap_share=pl.col("quality").is_in(["ambiguous", "insufficient"]).mean(),
    )
    _same(got, want, ["day", "cluster"])
    total = got.select(pl.sum_horizontal("definitive", "probable", "ambiguous", "insufficient")).to_series()
    assert (total == got["failures"]).all()


def test_port_hotspots_matches_polars(sample_lake):
    got = queries.run_query(sample_lake.root, "port_hotspots", {})
    keys = ["cluster", "node", "port"]
    named = sample_lake.scan("events").filter(
        pl.col("port").is_not_null(), pl.col("domain") == "network").collect().with_columns(
        hca_port=pl.col("params").str.json_path_match("$.hca_port").fill_null("1"), named_port=pl.col("port"))
    spelled = named.select("cluster", "node", "port").unique().with_columns(
        pl.col("port").str.extract_groups(r"^(.+)[:/]([0-9]+)$").struct.rename_fields(["hca", "hca_port"])
        .struct.unnest()).drop_nulls("hca").group_by("cluster", "node", "hca", "hca_port").agg(
        spelled=pl.col("port").min())
    events = named.join(spelled, left_on=["cluster", "node", "port", "hca_port"],
                        right_on=["cluster", "node", "hca", "hca_port"], how="left").with_columns(
        port=pl.coalesce("spelled", "port"))
    state = ["network.link_up", "network.link_training", "network.link_state_change"]
    last_up = events.filter(pl.col("cause") == "network.link_up").group_by(keys).agg(last_up=pl.col("ts").max())
    faults = events.filter(~pl.col("cause").is_in(state)).join(last_up, on=keys, how="left")
    down = pl.col("cause") == "network.link_down"
    per_port = faults.group_by(keys).agg(
        link_downs=pl.col("count").filter(down).sum(),
        flaps=pl.col("count").filter(down & (pl.col("last_up") >= pl.col("ts"))).sum()
        + pl.col("count").filter(pl.col("cause") == "network.link_flap").sum(),
        errors=pl.col("count").filter(~down & (pl.col("cause") != "network.link_flap")).sum(),
    )
    failed = _failed_with_attempts(sample_lake)
    exposed = faults.join(failed.explode("nodes").rename({"nodes": "node"}), on=["cluster", "node"]) \
        .filter(pl.col("ts").is_between(pl.col("a_start"), pl.col("a_end"))) \
        .group_by(keys).agg(failed_attempts=pl.col("attempt_id").n_unique())
    names = faults.select(*keys, "named_port").unique()
    blamed = failed.explode("culprit_nodes").explode("culprit_ports").select(
        "cluster", "attempt_id", node="culprit_nodes", named_port="culprit_ports"
    ).join(names, on=["cluster", "node", "named_port"]).group_by(keys).agg(
        blamed_attempts=pl.col("attempt_id").n_unique())
    want = per_port.join(exposed, on=keys, how="left").join(blamed, on=keys, how="left").with_columns(
        pl.col("failed_attempts", "blamed_attempts").fill_null(0))
    _same(got, want, keys)
    # The idle-node flap on gpu016 (no attempt running) touches no failed attempt.
    idle = got.filter(pl.col("node") == "gpu016", pl.col("port") == "mlx5_3:1")
    assert idle.select("link_downs", "flaps", "failed_attempts").rows() == [(1, 1, 0)]


def test_port_hotspots_names_the_switch_port_from_topology(tmp_path):
    lake = Lake(tmp_path)
    ts = pl.datetime(2026, 11, 28, 12, time_zone="UTC")
    events = pl.DataFrame({"port": ["mlx5_1", "mlx5_2:1", "mlx5_1"], "cause": ["network.link_down"] * 2
                           + ["network.link_up"]}).with_columns(
        ts=ts + pl.duration(seconds=pl.int_range(pl.len())), last_ts=None, count=pl.lit(1, pl.Int64),
        node=pl.lit("gpu008"), attempt_id=None, rank=None, gpu=None, source=pl.lit("syslog"),
        rule_id=pl.lit("fabric.mlx5_link_state"), event=pl.col("cause"), domain=pl.lit("network"),
        role=pl.lit("context"), action=None, params=pl.lit('{"hca_port":"1"}'), message=pl.lit("Link"),
        origin=pl.lit("test"), ts_source=pl.lit("line"), event_id=pl.col("port"),
    )
    lake.replace_partitions("events", events, cluster="c1", days=[date(2026, 11, 28)])
    topology = pl.DataFrame({"kind": ["hca_port"] * 2, "node": ["gpu008"] * 2, "hca": ["mlx5_1", "mlx5_2"],
                             "port": ["1", "1"], "switch": ["leaf-3", "leaf-4"], "switch_port": ["17", "18"],
                             "gpu": [None, None], "pci": [None, None], "origin": ["test"] * 2})
    lake.land("topology", topology, cluster="c1")
    got = queries.run_query(tmp_path, "port_hotspots", {}).sort("port")
    assert got.select("port", "switch", "switch_port", "link_downs", "flaps").rows() == [
        ("mlx5_1", "leaf-3", "17", 1, 1), ("mlx5_2:1", "leaf-4", "18", 1, 0)]


def test_port_hotspots_counts_a_port_named_two_ways_once(tmp_path):
    """mlx5_core names a port by its HCA (``mlx5_2``, the port number a parameter) where
    the IB core names it ``mlx5_2:1``: one port, one row, and a verdict naming either name
    counts for it. ``mlx5_2`` port 2 and a netdev stay rows of their own."""
    lake = Lake(tmp_path)
    ts = pl.datetime(2026, 11, 28, 12, time_zone="UTC")
    rows = [("mlx5_2", "1", "network.link_down"), ("mlx5_2:1", "1", "network.link_up"),
            ("mlx5_2:1", "1", "network.link_down"), ("mlx5_2", "2", "network.link_down"),
            ("ib0", "1", "network.link_down")]
    events = pl.DataFrame(rows, schema=["port", "hca_port", "cause"], orient="row").with_columns(
        ts=ts + pl.duration(seconds=pl.int_range(pl.len())), last_ts=None, count=pl.lit(1, pl.Int64),
        node=pl.lit("gpu008"), attempt_id=None, rank=None, gpu=None, source=pl.lit("syslog"),
        rule_id=pl.lit("fabric.mlx5_link_state"), event=pl.col("cause"), domain=pl.lit("network"),
        role=pl.lit("context"), action=None, params=pl.format('{{"hca_port":"{}"}}', "hca_port"),
        message=pl.lit("Link"), origin=pl.lit("test"), ts_source=pl.lit("line"),
        event_id=pl.format("{}-{}", "port", pl.int_range(pl.len())),
    ).drop("hca_port")
    lake.replace_partitions("events", events, cluster="c1", days=[date(2026, 11, 28)])
    got = queries.run_query(tmp_path, "port_hotspots", {}).sort("port")
    assert got.select("port", "link_downs", "flaps").rows() == [
        ("ib0", 1, 0), ("mlx5_2", 1, 0), ("mlx5_2:1", 2, 1)]


def test_params_are_typed_from_the_header_and_checked():
    assert queries.parse_params(["k=3", "since=2026-11-28"]) == {"k": "3", "since": "2026-11-28"}
    spec = queries.load_queries()["repeat_offenders"]
    assert queries.bind_params(spec, {"k": "3"}) == {"k": 3, "days": 7, "until": None, "cluster": None}
    with pytest.raises(queries.QueryError, match="not k=v"):
        queries.parse_params(["k3"])
    with pytest.raises(queries.QueryError, match="has no parameter"):
        queries.bind_params(spec, {"kk": "3"})
    with pytest.raises(queries.QueryError, match="YYYY-MM-DD"):
        queries.bind_params(spec, {"until": "yesterday"})


def test_bad_headers_and_names_give_located_errors(tmp_path):
    (tmp_path / "bad.sql").write_text("-- purpose: x\n-- param k INTEGER 2\nSELECT 1\n")
    with pytest.raises(queries.QueryError, match=r"bad.sql:2: bad param line"):
        queries.load_queries(tmp_path)
    with pytest.raises(queries.QueryError, match="no query 'nope'"):
        queries.run_query(tmp_path, "nope", {}, directory=Path(queries.QUERIES_DIR))


def test_write_formats(tmp_path, sample_lake, capsys):
    frame = queries.run_query(sample_lake.root, "repeat_offenders", {"k": "1"})
    queries.write(frame, "parquet", tmp_path / "r.parquet", Console())
    assert_frame_equal(pl.read_parquet(tmp_path / "r.parquet"), frame)
    queries.write(frame, "csv", None, Console())
    csv = capsys.readouterr().out
    assert csv.splitlines()[0].startswith("kind,cluster,node,gpu,attempts,causes")
    assert len(csv.splitlines()) == frame.height + 1
    queries.write(frame, "json", tmp_path / "r.json", Console())
    assert len(pl.read_json(tmp_path / "r.json")) == frame.height
    with pytest.raises(queries.QueryError, match="give -o"):
        queries.write(frame, "parquet", None, Console())
    with pytest.raises(queries.QueryError, match="unknown format"):
        queries.write(frame, "xlsx", None, Console())


def test_repeat_offenders_leave_out_the_victims_of_a_systemic_event(sample_lake, tmp_path):
    """Two failures blaming one node make it a repeat offender, unless one of them was a
    systemic event's (its evidence says so): the node was then a victim."""
    blamed = sample_lake.scan("results").filter(FAILED).collect().filter(
        pl.col("culprit_nodes").list.len() == 1).head(1)
    day, cluster = blamed["day"][0], blamed["cluster"][0]
    second = blamed.with_columns(pl.lit("slurm/c/99999/0").alias("attempt_id"), pl.lit("99999").alias("job_id"))
    systemic = blamed["evidence"][0][0] | {"rule_id": "fleet.systemic", "event": "systemic_event", "source": "fleet"}

    def offenders(rows: pl.DataFrame, root) -> list[str]:
        lake = Lake(root)
        lake.replace_partitions("results", rows.drop("cluster", "day"), cluster=cluster, days=[day])
        got = queries.run_query(root, "repeat_offenders", {"k": "2"})
        return got.filter(pl.col("kind") == "node")["node"].to_list()

    assert offenders(pl.concat([blamed, second]), tmp_path / "a") == blamed["culprit_nodes"][0].to_list()
    noted = second.with_columns(pl.col("evidence").list.concat(pl.lit([systemic], dtype=blamed["evidence"].dtype)))
    assert offenders(pl.concat([blamed, noted]), tmp_path / "b") == []
