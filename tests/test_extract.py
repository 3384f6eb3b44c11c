"""Vectorized extraction, map outcomes, flood dedupe, determinism and metric conditions.

The lines are verbatim from the shared corpus (``shared/corpus/real_lines.jsonl`` beside the
repository); each keeps its source URL.
The rules come from tests/good_rules/ (independent of the bundled rules/).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from engine.extract import EVENT_SCHEMA, dedupe_events, extract_events, extract_lines
from engine.metrics import metric_events
from engine.rules.loader import load_rule_pack

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

XID_79 = "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus."
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID_45 = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150
XID_13 = "[31609.615374] NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ChID 0052, Class 00000000, Offset 00001b0c, Data 1000f010"
# https://github.com/doitsujin/dxvk/issues/1027
NCCL_WATCHDOG = (
    "[rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, "
    "NumelOut=68124672, Timeout(ms)=600000) ran for 600099 milliseconds before timing out."
)
# https://github.com/hiyouga/LlamaFactory/issues/6269
IB_DOWN = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state DOWN physical_state LINK_UP"
IB_ACTIVE = "link mlx5_7/1 subnet_prefix fe80:0000:0000:0000 lid 3403 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP"
# https://github.com/ROCm/rccl/issues/1423
MLX5_INIT = "Feb 14 05:03:41 000-000-00000-1-gpu-1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link INIT"
# https://github.com/leptonai/gpud/pull/1209
UNRELATED = "[Sun Jan  5 18:28:55 2025] watchdog: BUG: soft lockup - CPU#18 stuck for 27s! [python3:2254956]"
# https://github.com/leptonai/gpud/blob/4a8de33a3f02e207f39e9023d67125592d599731/components/cpu/kmsg_matcher.go


@pytest.fixture(scope="module")
def pack():
    return load_rule_pack([Path(__file__).parent / "good_rules"])


def observations(rows: list[dict]) -> pl.DataFrame:
    """Observations (+ cluster, day, source) from partial rows; seconds → ts after T0."""
    full = [
        {
            "ts": T0 + timedelta(seconds=r.get("at", 0)), "ts_source": "line",
            "node": r.get("node", "gpu-node-01"), "attempt_id": r.get("attempt_id"),
            "rank": r.get("rank"), "program": "kernel", "message": r["message"],
            "origin": r.get("origin", f"/var/log/kern.log:{i + 1}"), "seq": i + 1,
            "input_id": "/var/log/kern.log", "cluster": "c1", "day": T0.date(),
            "source": r.get("source", "kernel"),
        }
        for i, r in enumerate(rows)
    ]
    return pl.DataFrame(full, schema_overrides={"rank": pl.Int32, "attempt_id": pl.String})


def test_real_lines_become_typed_events(pack):
    obs = observations([
        {"message": XID_79, "at": 0},
        {"message": NCCL_WATCHDOG, "at": 5, "source": "app", "attempt_id": "slurm/c1/42/0"},
        {"message": IB_DOWN, "at": 9, "source": "syslog"},
        {"message": UNRELATED, "at": 12},
    ])
    events = extract_events(obs.lazy(), pack)
    assert events.schema == EVENT_SCHEMA
    got = {r["rule_id"]: r for r in events.to_dicts()}
    assert set(got) == {"test.nvrm_xid", "test.gpu_fallen_off_bus", "test.nccl_watchdog_timeout", "test.ib_port_state"}
    xid = got["test.nvrm_xid"]
    assert (xid["event"], xid["cause"], xid["role"], xid["action"]) == (
        "gpu_fallen_off_bus", "gpu.fallen_off_bus", "root_candidate", "drain_node_and_restart")
    assert (xid["gpu"], xid["params"], xid["event_id"]) == ("0000:06:00", '{"xid":"79"}', "test.nvrm_xid@/var/log/kern.log:1")
    assert (xid["count"], xid["ts"], xid["last_ts"], xid["node"], xid["cluster"]) == (1, T0, T0, "gpu-node-01", "c1")
    nccl = got["test.nccl_watchdog_timeout"]
    assert (nccl["rank"], nccl["attempt_id"], nccl["role"], nccl["source"]) == (4, "slurm/c1/42/0", "cascade", "app")
    assert json.loads(nccl["params"]) == {"op": "_REDUCE_SCATTER_BASE", "seq": "7753", "timeout_ms": "600000"}
    link = got["test.ib_port_state"]
    assert (link["port"], link["cause"], link["event"]) == ("mlx5_7:1", "network.link_down", "ib_link_down")


def test_map_outcomes_default_and_drop(pack):
    events = extract_lines([XID_79, XID_45, XID_13, IB_DOWN, IB_ACTIVE, MLX5_INIT], pack)
    rows = {(r["origin"], r["rule_id"]): r for r in events.to_dicts()}
    assert rows[("<input>:1", "test.nvrm_xid")]["cause"] == "gpu.fallen_off_bus"
    # table entry without action: the rule's own action applies
    assert [rows[("<input>:2", "test.nvrm_xid")][k] for k in ("event", "role", "action")] == [
        "gpu_channel_teardown", "cascade", "investigate"]
    # XID 13 and state ACTIVE are not in their map tables and those maps have no default
    assert not any(origin in ("<input>:3", "<input>:5") for origin, _ in rows)
    # the mlx5 map's default keeps the line as a benign event (benign is still emitted)
    init = rows[("<input>:6", "test.mlx5_port_state")]
    assert (init["role"], init["cause"], json.loads(init["params"])["state"]) == ("benign", "network.link_state", "INIT")


def test_one_line_can_match_a_generic_and_a_specific_rule(pack):
    events = extract_lines([XID_79], pack)
    assert events["rule_id"].to_list() == ["test.gpu_fallen_off_bus", "test.nvrm_xid"]


def test_rule_sources_and_observation_location_win(pack):
    obs = observations([
        {"message": XID_79, "source": "app"},  # test.nvrm_xid only reads kernel and syslog
        {"message": NCCL_WATCHDOG, "source": "app", "rank": 12},
    ])
    events = extract_events(obs, pack)
    assert "test.nvrm_xid" not in events["rule_id"].to_list()
    assert events.filter(pl.col("rule_id") == "test.nccl_watchdog_timeout")["rank"].to_list() == [12]


def test_case_insensitive_prefilter_and_regex(pack):
    events = extract_lines([XID_79.replace("fallen off the bus", "FALLEN OFF THE BUS")], pack)
    assert "test.gpu_fallen_off_bus" in events["rule_id"].to_list()


def test_flood_of_one_xid_collapses_to_one_event(pack):
    obs = observations([{"message": XID_79, "at": i * 0.5} for i in range(1000)])
    events = extract_events(obs, pack).filter(pl.col("rule_id") == "test.nvrm_xid")
    assert events.height == 1
    row = events.row(0, named=True)
    assert (row["count"], row["ts"], row["last_ts"]) == (1000, T0, T0 + timedelta(seconds=499.5))
    assert row["origin"] == "/var/log/kern.log:1"


def test_bursts_further_apart_than_the_window_stay_separate(pack):
    # the xid rule's window is 5m: gaps of 4m chain into one burst, a 6m gap starts another
    times = [0, 240, 480, 480 + 360, 480 + 360 + 60]
    obs = observations([{"message": XID_79, "at": t} for t in times])
    events = extract_events(obs, pack).filter(pl.col("rule_id") == "test.nvrm_xid")
    assert events["count"].to_list() == [3, 2]
    assert events["ts"].to_list() == [T0, T0 + timedelta(seconds=840)]
    assert events["last_ts"].to_list() == [T0 + timedelta(seconds=480), T0 + timedelta(seconds=900)]


def test_repeats_on_different_nodes_or_gpus_are_not_merged(pack):
    obs = observations([
        {"message": XID_79, "node": "a"}, {"message": XID_79, "node": "b", "at": 1},
        {"message": XID_79.replace("0000:06:00", "0000:07:00"), "node": "a", "at": 2},
        {"message": XID_45, "node": "a", "at": 3},
    ])
    events = extract_events(obs, pack).filter(pl.col("rule_id") == "test.nvrm_xid")
    assert events.select("node", "gpu", "event", "count").rows() == [
        ("a", "0000:06:00", "gpu_fallen_off_bus", 1), ("b", "0000:06:00", "gpu_fallen_off_bus", 1),
        ("a", "0000:07:00", "gpu_fallen_off_bus", 1), ("a", "0000:dc:00", "gpu_channel_teardown", 1),
    ]


def test_interleaved_floods_of_two_gpus_collapse_each_on_its_own(pack):
    # two GPUs flooding at once, their lines interleaved in the file, beside a lone XID
    other = XID_79.replace("0000:06:00", "0000:07:00")
    rows = [{"message": XID_79 if i % 2 == 0 else other, "at": i} for i in range(10)]
    events = extract_events(observations([*rows, {"message": XID_45, "at": 3}]), pack)
    s = timedelta(seconds=1)
    assert events.filter(pl.col("rule_id") == "test.nvrm_xid").select("gpu", "count", "ts", "last_ts").rows() == [
        ("0000:06:00", 5, T0, T0 + 8 * s), ("0000:07:00", 5, T0 + s, T0 + 9 * s), ("0000:dc:00", 1, T0 + 3 * s, T0 + 3 * s),
    ]


def test_dedupe_is_idempotent(pack):
    obs = observations([{"message": XID_79, "at": i} for i in range(10)])
    once = extract_events(obs, pack)
    assert_frame_equal(dedupe_events(once, pack), once)


def test_collapsing_each_files_floods_then_their_union_is_collapsing_the_lines(pack):
    """Landing collapses each file's floods, a run the day's: the same events as one pass
    over every line. Here floods of two GPUs and a lone XID, split over three files at
    random, with stretches where one file's flood outlasts the others' shorter ones."""
    other = XID_79.replace("0000:06:00", "0000:07:00")
    stamps = [0, 1, 2, 40, 41, 100, 230, 231, 400, 700, 701, 702, 1000, 1001, 1400, 1401, 2000]
    rows = [{"message": m, "at": at, "origin": f"f:{i}"} for i, (m, at) in enumerate(
        [(XID_79, at) for at in stamps] + [(other, at * 2) for at in stamps] + [(XID_45, 5)]
    )]
    whole = extract_events(observations(rows), pack)
    assert whole["count"].max() > 1 and whole.height > 3
    for seed in range(20):
        part = pl.Series(random.Random(seed).choices(range(3), k=len(rows)))
        files = [observations([r for r, p in zip(rows, part, strict=True) if p == k]) for k in range(3)]
        pieces = pl.concat([extract_events(f, pack) for f in files if f.height])
        assert_frame_equal(dedupe_events(pieces, pack), whole)


def test_extraction_is_deterministic(pack):
    rows = [
        {"message": m, "at": i % 7, "node": f"n{i % 3}"}
        for i, m in enumerate([XID_79, XID_45, NCCL_WATCHDOG, IB_DOWN, MLX5_INIT, UNRELATED] * 20)
    ]
    obs = observations(rows)
    first = extract_events(obs, pack)
    assert_frame_equal(first, extract_events(obs, pack))
    assert_frame_equal(first, extract_events(obs.sample(fraction=1.0, shuffle=True, seed=7), pack))


def test_extract_lines_origins_and_empty_input(pack):
    events = extract_lines([UNRELATED, IB_DOWN], pack, source="syslog")
    assert events.select("origin", "rule_id").rows() == [("<input>:2", "test.ib_port_state")]
    assert extract_lines([], pack).schema == EVENT_SCHEMA
    assert extract_lines([UNRELATED], pack).height == 0


def metric_samples(series: dict[tuple[str, str], list[float]], step: int = 60) -> pl.DataFrame:
    """Samples ``{(node, metric): [values]}`` one ``step`` apart, with hca/port set."""
    rows = [
        {"ts": T0 + timedelta(seconds=i * step), "node": node, "metric": metric, "gpu": None,
         "hca": "mlx5_0", "port": "1", "value": float(v), "labels": None,
         "origin": f"prom:{node}:{metric}:{i}", "input_id": "prom", "cluster": "c1"}
        for (node, metric), values in series.items()
        for i, v in enumerate(values)
    ]
    return pl.DataFrame(rows, schema_overrides={"gpu": pl.String, "labels": pl.String})


def test_metric_increase_ignores_a_counter_reset(pack):
    samples = metric_samples({("n1", "node_infiniband_link_downed_total"): [3, 3, 4, 0, 0, 2, 2]})
    events = metric_events(samples, pack, dedupe=False)
    assert events["origin"].to_list() == [
        "prom:n1:node_infiniband_link_downed_total:2", "prom:n1:node_infiniband_link_downed_total:5"]
    row = events.row(0, named=True)
    assert (row["port"], row["cause"], row["source"]) == ("mlx5_0:1", "network.link_down", "metrics")
    assert json.loads(row["params"])["previous"] == 3.0
    assert events.schema == EVENT_SCHEMA


def test_metric_above_fires_once_per_run_and_series_are_separate(pack):
    temps = [80, 95, 96, 85, 91, 92]
    samples = metric_samples({("n1", "DCGM_FI_DEV_GPU_TEMP"): temps, ("n2", "DCGM_FI_DEV_GPU_TEMP"): [99]})
    events = metric_events(samples, pack, dedupe=False)
    assert events.select("node", "origin").rows() == [
        ("n2", "prom:n2:DCGM_FI_DEV_GPU_TEMP:0"), ("n1", "prom:n1:DCGM_FI_DEV_GPU_TEMP:1"),
        ("n1", "prom:n1:DCGM_FI_DEV_GPU_TEMP:4"),
    ]
    # each event spans its run: its samples counted, its last one as last_ts
    assert events["count"].to_list() == [1, 2, 2]
    assert events["last_ts"].to_list()[1] == samples.filter(pl.col("origin") == "prom:n1:DCGM_FI_DEV_GPU_TEMP:2")["ts"][0]
    # with the 5m dedupe window the two runs on n1 (3 minutes apart) fold into one event
    folded = metric_events(samples, pack)
    assert folded.filter(pl.col("node") == "n1")["count"].to_list() == [4]


def test_metric_below_and_change_conditions(tmp_path, pack):
    (tmp_path / "m.yaml").write_text("""rules:
  - kind: metric
    id: t.below
    title: Link rate dropped below 100
    metrics: [rate]
    condition: below
    threshold: 100
    event: slow
    domain: network
    cause: network.degraded
    role: context
    tests: [{samples: [[0, 200], [1, 50]], events: 1}]
  - kind: metric
    id: t.change
    title: Link state changed
    metrics: [state]
    condition: change
    event: state_change
    domain: network
    cause: network.link_state
    role: context
    tests: [{samples: [[0, 1], [1, 1], [2, 0]], events: 1}]
""")
    local = load_rule_pack([tmp_path])
    samples = metric_samples({("n1", "rate"): [200, 50, 40, 200, 10], ("n1", "state"): [1, 1, 0, 0, 1]})
    events = metric_events(samples, local, dedupe=False)
    by_rule = events.group_by("rule_id").agg(pl.col("origin").sort()).sort("rule_id").rows()
    assert by_rule == [
        ("t.below", ["prom:n1:rate:1", "prom:n1:rate:4"]),
        ("t.change", ["prom:n1:state:2", "prom:n1:state:4"]),
    ]
    assert metric_events(samples.head(0), local).schema == EVENT_SCHEMA


def test_a_pcie_error_names_a_gpu_only_for_a_device_the_nvidia_driver_owns():
    """AER lines name the device that logged the error: a GPU under ``nvidia``, otherwise a
    root port or another endpoint (a NIC), kept in ``params`` as ``device``. Real lines from
    the references in ``rules/gpu_health.yaml``."""
    lines = [
        "nvidia 0000:01:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)",
        "e1000e 0002:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible, (Unregistered Agent ID)",
        "pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)",
    ]
    events = extract_lines(lines, load_rule_pack()).filter(pl.col("rule_id") == "pcie_aer_bus_error")
    assert events["gpu"].to_list() == ["0000:01:00", None, None]
    devices = [json.loads(p).get("device") for p in events["params"]]
    assert devices == [None, "0002:01:00.0", "0000:00:02.0"]
