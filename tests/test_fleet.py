"""The fleet stage: switch ports from topology, repeat offenders, systemic events."""

from __future__ import annotations

import polars as pl

from engine.config import EngineConfig
from engine.fleet import apply_fleet_notes, fleet_notes
from engine.run import attribute
from ingest.schema import RESULTS, TOPOLOGY
from tests.engine_frames import at, attempts, events
from tests.test_decide import full_coverage, pack

CONFIG = EngineConfig()


def run_fleet(att: pl.DataFrame, ev: pl.DataFrame, topology: pl.DataFrame | None = None,
              history: pl.DataFrame | None = None) -> dict[str, dict]:
    verdicts, _ = attribute(att, ev, full_coverage(att), pack(), CONFIG)
    empty_history = pl.from_arrow(RESULTS.empty_table()).with_columns(pl.lit(None, pl.String).alias("cluster"))
    empty_topology = pl.from_arrow(TOPOLOGY.empty_table()).with_columns(pl.lit(None, pl.String).alias("cluster"))
    notes = fleet_notes(verdicts, empty_history if history is None else history,
                        empty_topology if topology is None else topology, CONFIG)
    out = apply_fleet_notes(verdicts, notes)
    assert out.height == verdicts.height and out.columns == verdicts.columns
    return {r["attempt_id"]: r for r in out.to_dicts()}


def test_culprit_port_names_the_switch_port_it_is_cabled_to():
    att = attempts({"attempt_id": "a", "nodes": ["n2"]})
    ev = events({"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down",
                 "ts": at(5), "port": "mlx5_0:1"})
    topology = pl.DataFrame({
        "kind": ["hca_port"], "node": ["n2"], "hca": ["mlx5_0"], "port": ["1"], "switch": ["leaf-07"],
        "switch_port": ["17"], "gpu": [None], "pci": [None], "origin": ["t.csv:2"], "cluster": ["c"],
    }, schema_overrides={"gpu": pl.String, "pci": pl.String})
    v = run_fleet(att, ev, topology)
    assert v["a"]["culprit_ports"] == ["mlx5_0:1", "switch:leaf-07/17"]


def cabled(*rows: tuple[str, str, str, str, str]) -> pl.DataFrame:
    """Topology rows of HCA ports: ``(node, hca, port, switch, switch_port)`` each."""
    nodes, hcas, ports, switches, switch_ports = (list(c) for c in zip(*rows, strict=True))
    return pl.DataFrame({
        "kind": ["hca_port"] * len(rows), "node": nodes, "hca": hcas, "port": ports, "switch": switches,
        "switch_port": switch_ports, "gpu": [None] * len(rows), "pci": [None] * len(rows),
        "origin": [f"t.csv:{i + 2}" for i in range(len(rows))], "cluster": ["c"] * len(rows),
    }, schema_overrides={"gpu": pl.String, "pci": pl.String})


def test_a_port_is_looked_up_on_the_nodes_of_the_fabrics_fault_only():
    """n1's GPU fell off the bus as n2's mlx5_5:1 went down: both nodes are suspects, but
    only n2's port went down, and n1's mlx5_5:1 (cabled to port 28) did nothing."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]})
    ev = events({"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(5),
                 "gpu": "0000:3b:00"},
                {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down",
                 "ts": at(5) + (at(0.01) - at(0)), "port": "mlx5_5:1"})
    topology = cabled(("n1", "mlx5_5", "1", "leaf-03", "28"), ("n2", "mlx5_5", "1", "leaf-03", "30"))
    v = run_fleet(att, ev, topology)["a"]
    assert v["quality"] == "ambiguous" and v["culprit_nodes"] == ["n1", "n2"]
    assert v["culprit_ports"] == ["mlx5_5:1", "switch:leaf-03/30"]


def test_a_port_named_by_its_device_alone_is_that_devices_one_cabled_port():
    att = attempts({"attempt_id": "a", "nodes": ["n2"]})
    ev = events({"node": "n2", "event": "ib_error", "domain": "network", "cause": "network.ib_completion_error",
                 "ts": at(5), "port": "mlx5_6"})
    v = run_fleet(att, ev, cabled(("n2", "mlx5_6", "1", "leaf-02", "8"), ("n2", "mlx5_7", "1", "leaf-02", "9")))
    assert v["a"]["culprit_ports"] == ["mlx5_6", "switch:leaf-02/8"]


def test_a_node_blamed_by_two_jobs_is_a_repeat_offender_and_corroborates_both():
    att = attempts({"attempt_id": "a", "job_id": "1", "nodes": ["n1"]},
                   {"attempt_id": "b", "job_id": "2", "nodes": ["n1"], "start_ts": at(100), "end_ts": at(160)},
                   {"attempt_id": "c", "job_id": "3", "nodes": ["n5"]})
    ev = events({"node": "n1", "event": "xid", "ts": at(10)}, {"node": "n1", "event": "xid", "ts": at(110)},
                {"node": "n5", "event": "xid", "ts": at(10)})
    v = run_fleet(att, ev)
    for attempt in ("a", "b"):
        assert v[attempt]["quality"] == "definitive"
        notes = [e for e in v[attempt]["evidence"] if e["rule_id"] == "fleet.repeat_offender"]
        assert len(notes) == 1 and "1 other job" in notes[0]["message"]
    assert v["c"]["quality"] == "probable"
    assert not any(e["source"] == "fleet" for e in v["c"]["evidence"])


def test_a_repeated_xid_verdict_is_not_made_definitive_by_the_repeat_it_was_inferred_from():
    """Two jobs' XID 13 on one GPU made both verdicts the GPU's: those two jobs are that
    inference's evidence, and the repeat-offender note over the same jobs adds none."""
    att = attempts({"attempt_id": "a", "job_id": "1", "nodes": ["n1"]},
                   {"attempt_id": "b", "job_id": "2", "nodes": ["n1"], "start_ts": at(100), "end_ts": at(160)})
    repeated = {"node": "n1", "event": "xid_13_graphics_exception", "domain": "gpu", "cause": "gpu.repeated_xid",
                "params": '{"undecided": "the same XID on this GPU in another job"}'}
    v = run_fleet(att, events({**repeated, "ts": at(10)}, {**repeated, "ts": at(110)}))
    for attempt in ("a", "b"):
        assert any(e["rule_id"] == "fleet.repeat_offender" for e in v[attempt]["evidence"])
        assert v[attempt]["quality"] == "probable"


def test_a_repeat_offender_among_two_undecided_nodes_leaves_the_verdict_probable():
    """Two nodes whose failing connections name only each other: n1 failing another job
    before does not show the fault was n1's and not n2's."""
    att = attempts({"attempt_id": "a", "job_id": "1", "nodes": ["n1"]},
                   {"attempt_id": "b", "job_id": "2", "nodes": ["n1", "n2"], "start_ts": at(100), "end_ts": at(160)})
    undecided = {"event": "ib_error", "domain": "network", "cause": "network.transport_retry_exceeded",
                 "ts": at(110), "params": '{"undecided": "the two ends name only each other"}'}
    v = run_fleet(att, events({"node": "n1", "event": "xid", "ts": at(10)}, {**undecided, "node": "n1"},
                              {**undecided, "node": "n2"}))
    assert v["b"]["culprit_nodes"] == ["n1", "n2"]
    assert any(e["rule_id"] == "fleet.repeat_offender" for e in v["b"]["evidence"])
    assert v["b"]["quality"] == "probable" and v["a"]["quality"] == "definitive"


def test_a_suspect_of_another_jobs_ambiguous_verdict_corroborates_nothing():
    att = attempts({"attempt_id": "a", "job_id": "1", "nodes": ["n1", "n2"]},
                   {"attempt_id": "b", "job_id": "2", "nodes": ["n1"], "start_ts": at(100), "end_ts": at(160)})
    v = run_fleet(att, events({"node": "n1", "event": "xid", "ts": at(10)},
                              {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down",
                               "ts": at(10)},
                              {"node": "n1", "event": "xid", "ts": at(110)}))
    assert v["a"]["quality"] == "ambiguous"
    assert v["b"]["quality"] == "probable"


def test_one_cause_on_many_nodes_at_once_is_systemic():
    att = attempts(*({"attempt_id": f"a{i}", "job_id": str(i), "nodes": [f"n{i}"]} for i in range(4)))
    ev = events(*({"node": f"n{i}", "event": "nfs", "domain": "storage", "cause": "storage.filesystem_unavailable",
                   "ts": at(10 + i * 0.5)} for i in range(3)),
                {"node": "n3", "event": "nfs", "domain": "storage", "cause": "storage.filesystem_unavailable",
                 "ts": at(50)})
    v = run_fleet(att, ev)
    for attempt in ("a0", "a1", "a2"):
        note = [e for e in v[attempt]["evidence"] if e["rule_id"] == "fleet.systemic"]
        assert len(note) == 1 and "on 3 nodes" in note[0]["message"]
    assert not any(e["rule_id"] == "fleet.systemic" for e in v["a3"]["evidence"])


def test_the_suspects_of_one_ambiguous_verdict_are_no_systemic_event():
    """Three roots of three domains on three nodes at once: competing explanations of one
    job, not one cause on three nodes."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2", "n3"]})
    ev = events({"node": "n1", "event": "xid", "ts": at(10)},
                {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down",
                 "ts": at(10.001), "port": "mlx5_0:1"},
                {"node": "n3", "event": "nfs", "domain": "storage", "cause": "storage.filesystem_unavailable",
                 "ts": at(10.002)})
    v = run_fleet(att, ev)["a"]
    assert (v["quality"], v["culprit_nodes"]) == ("ambiguous", ["n1", "n2", "n3"])
    assert not any(e["rule_id"] == "fleet.systemic" for e in v["evidence"])


def test_a_shared_filesystem_outage_that_names_no_node_is_systemic_by_the_nodes_it_struck():
    """Each job's nodes all lost the filesystem (its server is at fault, so the verdicts name
    no culprit): three jobs on five nodes within minutes are one outage."""
    from datetime import UTC, datetime

    from engine.decide import EVIDENCE_DTYPE
    from engine.fleet import mark_systemic

    struck = [["n1", "n2"], ["n3", "n4"], ["n5"], ["n6"]]
    verdicts = pl.DataFrame({
        "attempt_id": ["a", "b", "c", "d"], "cluster": "c", "domain": "storage",
        "cause": "storage.filesystem_unavailable", "quality": "definitive",
        "first_fault_ts": [datetime(2026, 11, 20, 10, m, tzinfo=UTC) for m in (20, 21, 24, 50)],
        "culprit_nodes": [[], [], [], []], "affected_nodes": struck, "culprit_ports": [[], [], [], []],
    }, schema_overrides={"culprit_nodes": pl.List(pl.String), "culprit_ports": pl.List(pl.String)}).with_columns(
        pl.lit([], dtype=pl.List(EVIDENCE_DTYPE)).alias("evidence"))
    out = {r["attempt_id"]: r["evidence"] for r in mark_systemic(verdicts, CONFIG).to_dicts()}
    for attempt in ("a", "b", "c"):
        assert [e["rule_id"] for e in out[attempt]] == ["fleet.systemic"]
        assert "on 5 nodes" in out[attempt][0]["message"]
    assert out["d"] == []


def test_one_jobs_own_nodes_waiting_on_its_fault_are_no_systemic_event():
    """A verdict that names no culprit counts the nodes it struck only beside another job
    with the same cause: one job's four nodes all failing on its own full /tmp, or its
    transport errors, say nothing of a shared component."""
    from datetime import UTC, datetime

    from engine.decide import EVIDENCE_DTYPE
    from engine.fleet import mark_systemic

    verdicts = pl.DataFrame({
        "attempt_id": ["a", "b"], "cluster": "c", "domain": "storage",
        "cause": ["storage.disk_full", "network.transport_retry_exceeded"], "quality": "probable",
        "first_fault_ts": [datetime(2026, 11, 20, 10, 20, tzinfo=UTC)] * 2,
        "culprit_nodes": [[], []], "affected_nodes": [["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"]],
        "culprit_ports": [[], []],
    }, schema_overrides={"culprit_nodes": pl.List(pl.String), "culprit_ports": pl.List(pl.String)}).with_columns(
        pl.lit([], dtype=pl.List(EVIDENCE_DTYPE)).alias("evidence"))
    assert all(r["evidence"] == [] for r in mark_systemic(verdicts, CONFIG).to_dicts())


def test_a_systemic_event_whose_culprit_ports_share_one_switch_names_it():
    """A leaf switch died: three jobs' nodes lost their ports at once, every one cabled to
    leaf-03 (its description, as ibnetdiscover prints it, holds a "/"). Two minutes later a
    cable was pulled on n3, under another leaf: a fault of its own, which neither joins the
    event nor keeps it from naming leaf-03. The switch is the culprit, not the nodes behind
    it: their verdicts name no culprit node (the nodes stay affected); n3's names n3."""
    att = attempts(*({"attempt_id": f"a{i}", "job_id": str(i), "nodes": [f"n{i}"]} for i in range(4)))
    ev = events(*({"node": f"n{i}", "event": "link_down", "domain": "network", "cause": "network.link_down",
                   "ts": at(10 + i * 0.2 + (2 if i == 3 else 0)), "port": "mlx5_0:1"} for i in range(4)))
    topology = pl.DataFrame({
        "kind": "hca_port", "node": ["n0", "n1", "n2", "n3"], "hca": "mlx5_0", "port": "1",
        "switch": ["MF0;leaf-03:MQM9700/U1"] * 3 + ["MF0;leaf-04:MQM9700/U1"], "switch_port": ["1", "2", "3", "1"],
        "gpu": None, "pci": None, "origin": "t.ibnetdiscover", "cluster": "c",
    }, schema_overrides={"gpu": pl.String, "pci": pl.String})
    v = run_fleet(att, ev, topology)
    for attempt in ("a0", "a1", "a2"):
        note = [e for e in v[attempt]["evidence"] if e["rule_id"] == "fleet.systemic"]
        assert len(note) == 1
        assert note[0]["message"].startswith("network.link_down was the root cause on 3 nodes")
        assert note[0]["message"].endswith("every culprit port is cabled to switch MF0;leaf-03:MQM9700/U1")
        assert v[attempt]["culprit_nodes"] == [] and v[attempt]["affected_nodes"] == [f"n{attempt[1]}"]
        assert v[attempt]["culprit_ports"] == ["mlx5_0:1", f"switch:MF0;leaf-03:MQM9700/U1/{int(attempt[1]) + 1}"]
    assert not any(e["rule_id"] == "fleet.systemic" for e in v["a3"]["evidence"])
    assert v["a3"]["culprit_nodes"] == ["n3"]


def test_a_victim_of_a_systemic_event_is_no_repeat_offender():
    """n0 lost its port when a switch took three nodes down at once, then hit an XID in
    another job: one own fault, not two. n5's two XIDs in two jobs still make a lemon."""
    att = attempts(*({"attempt_id": f"a{i}", "job_id": str(i), "nodes": [f"n{i}"]} for i in range(3)),
                   {"attempt_id": "b", "job_id": "7", "nodes": ["n0"], "start_ts": at(100), "end_ts": at(160)},
                   {"attempt_id": "c", "job_id": "8", "nodes": ["n5"]},
                   {"attempt_id": "d", "job_id": "9", "nodes": ["n5"], "start_ts": at(100), "end_ts": at(160)})
    ev = events(*({"node": f"n{i}", "event": "link_down", "domain": "network", "cause": "network.link_down",
                   "ts": at(10 + i * 0.2), "port": "mlx5_0:1"} for i in range(3)),
                {"node": "n0", "event": "xid", "ts": at(110)},
                {"node": "n5", "event": "xid", "ts": at(10)}, {"node": "n5", "event": "xid", "ts": at(110)})
    v = run_fleet(att, ev)
    assert not any(e["rule_id"] == "fleet.repeat_offender" for e in v["b"]["evidence"] + v["a0"]["evidence"])
    assert any(e["rule_id"] == "fleet.repeat_offender" for e in v["d"]["evidence"])


def test_one_fault_that_struck_two_jobs_sharing_a_node_is_no_repeat():
    """Two jobs on one node's GPUs, one XID seen by both at the same instant: one failure."""
    att = attempts({"attempt_id": "a", "job_id": "1", "nodes": ["n1"]},
                   {"attempt_id": "b", "job_id": "2", "nodes": ["n1"]})
    ev = events({"node": "n1", "event": "xid", "ts": at(10)})
    v = run_fleet(att, ev)
    assert not any(e["rule_id"] == "fleet.repeat_offender" for e in v["a"]["evidence"] + v["b"]["evidence"])


def test_nan_losses_of_several_jobs_on_one_node_alone_are_noted_as_silent_data_corruption():
    """Two users' losses went NaN on the ranks of n3 alone: each verdict stays the job's,
    probable at most, with a note naming n3 and n3 its culprit (the node to test); a NaN on
    every node of a job (its learning rate) and a NaN elsewhere are left alone."""
    att = attempts({"attempt_id": "a", "job_id": "1", "user": "u1", "nodes": ["n3", "n4"]},
                   {"attempt_id": "b", "job_id": "2", "user": "u2", "nodes": ["n2", "n3"],
                    "start_ts": at(100), "end_ts": at(160)},
                   {"attempt_id": "c", "job_id": "3", "user": "u3", "nodes": ["n3", "n5"],
                    "start_ts": at(200), "end_ts": at(260)},
                   {"attempt_id": "d", "job_id": "4", "user": "u4", "nodes": ["n6"]})
    nan = {"event": "workload.non_finite_loss", "domain": "workload", "cause": "workload.non_finite_loss",
           "action": "fix_workload", "source": "app", "message": "Loss is nan, stopping training"}
    ev = events({**nan, "attempt_id": "a", "node": "n3", "rank": 3, "ts": at(20)},
                {**nan, "attempt_id": "b", "node": "n3", "rank": 11, "ts": at(120)},
                {**nan, "attempt_id": "c", "node": "n3", "rank": 0, "ts": at(220)},
                {**nan, "attempt_id": "c", "node": "n5", "rank": 8, "ts": at(220)},
                {**nan, "attempt_id": "d", "node": "n6", "rank": 0, "ts": at(20)})
    v = run_fleet(att, ev)
    for attempt in ("a", "b"):
        assert (v[attempt]["cause"], v[attempt]["quality"]) == ("workload.non_finite_loss", "probable")
        assert v[attempt]["culprit_nodes"] == ["n3"]
        notes = [e for e in v[attempt]["evidence"] if e["rule_id"] == "fleet.sdc_suspect"]
        assert [(n["node"], "1 other job(s) ended on a GPU fault on n3 alone too (workload.non_finite_loss)"
                 in n["message"]) for n in notes] == [("n3", True)]
    for attempt in ("c", "d"):
        assert not any(e["rule_id"] == "fleet.sdc_suspect" for e in v[attempt]["evidence"])
        assert v[attempt]["culprit_nodes"] == []


def test_cuda_faults_of_several_jobs_on_one_node_alone_make_its_gpu_a_suspect():
    """Three users' jobs on n3 ended on an illegal memory access, an XID 13 and a NaN loss,
    each on n3's ranks alone: each verdict stays its code's, probable at most, with a note
    naming n3 and the other jobs' causes. The same fault seen by two jobs sharing n3 at one
    instant is one fault; an ambiguous verdict, a fault on two nodes and a CUDA OOM are
    no such faults."""
    att = attempts({"attempt_id": "a", "job_id": "1", "user": "u1", "nodes": ["n3", "n4"]},
                   {"attempt_id": "b", "job_id": "2", "user": "u2", "nodes": ["n3"],
                    "start_ts": at(100), "end_ts": at(160)},
                   {"attempt_id": "c", "job_id": "3", "user": "u3", "nodes": ["n2", "n3"],
                    "start_ts": at(200), "end_ts": at(260)},
                   {"attempt_id": "d", "job_id": "4", "user": "u4", "nodes": ["n5", "n6"]},
                   {"attempt_id": "e", "job_id": "5", "user": "u5", "nodes": ["n5"],
                    "start_ts": at(100), "end_ts": at(160)},
                   {"attempt_id": "f", "job_id": "6", "user": "u6", "nodes": ["n7"]},
                   {"attempt_id": "g", "job_id": "7", "user": "u7", "nodes": ["n7"]})
    app = {"domain": "workload", "action": "fix_workload", "source": "app"}
    ima = {**app, "event": "workload.illegal_memory_access", "cause": "workload.illegal_memory_access",
           "message": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    oom = {**app, "event": "workload.cuda_oom", "cause": "workload.cuda_oom",
           "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}
    xid13 = {"event": "xid_13_graphics_exception", "domain": "workload", "cause": "workload.gpu_illegal_address",
             "action": "fix_workload", "source": "kmsg",
             "message": "NVRM: Xid (PCI:0000:9d:00): 13, pid=48871, name=python, Graphics Exception: ESR 0x50d730=0x2"}
    nan = {**app, "event": "workload.non_finite_loss", "cause": "workload.non_finite_loss",
           "message": "Loss is nan, stopping training"}
    ev = events({**ima, "attempt_id": "a", "node": "n3", "rank": 2, "ts": at(20)},
                {**xid13, "node": "n3", "ts": at(120)},
                {**nan, "attempt_id": "c", "node": "n3", "rank": 9, "ts": at(220)},
                {**ima, "attempt_id": "d", "node": "n5", "rank": 1, "ts": at(20)},
                {**ima, "attempt_id": "d", "node": "n6", "rank": 9, "ts": at(20)},
                {**oom, "attempt_id": "e", "node": "n5", "rank": 0, "ts": at(120)},
                {**xid13, "node": "n7", "ts": at(20)})
    v = run_fleet(att, ev)
    expected = {"a": ("fleet.gpu_fault_suspect", "workload.gpu_illegal_address, workload.non_finite_loss"),
                "b": ("fleet.gpu_fault_suspect", "workload.illegal_memory_access, workload.non_finite_loss"),
                "c": ("fleet.sdc_suspect", "workload.gpu_illegal_address, workload.illegal_memory_access")}
    for attempt, (rule, causes) in expected.items():
        assert (v[attempt]["quality"], v[attempt]["culprit_nodes"]) == ("probable", ["n3"])
        notes = [e for e in v[attempt]["evidence"] if e["source"] == "fleet"]
        assert [(n["rule_id"], n["node"]) for n in notes] == [(rule, "n3")]
        assert f"2 other job(s) ended on a GPU fault on n3 alone too ({causes})" in notes[0]["message"]
    for attempt in "defg":
        assert not any(e["source"] == "fleet" for e in v[attempt]["evidence"]), attempt
