"""Correlate and decide on hand-built events: root vs cascade, ambiguity, quality, state
fallback, link recovery, determinism."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from engine.config import EngineConfig
from engine.rules.loader import RulePack
from engine.rules.model import PrecedenceRule, Selector, StateRule, SuppressRule
from engine.run import attribute
from tests.engine_frames import at, attempts, events

STATE_RULES = (
    StateRule(kind="state", id="state.timeout", title="t", states=["timeout"], event="time_limit",
              domain="scheduler", cause="scheduler.time_limit", action="increase_time_limit"),
    StateRule(kind="state", id="state.node_fail", title="t", states=["node_fail"], event="node_fail",
              domain="host", cause="host.node_failure"),
)
SUPPRESS = (
    SuppressRule(kind="suppress", id="s.infra", title="t", root=Selector(domains=["gpu", "network", "host"]),
                 cascade=Selector(events=["nccl_timeout", "cuda_error"]), window="40m", before="30s"),
)
PRECEDENCE = (
    PrecedenceRule(kind="precedence", id="p.xid_over_cuda", title="t", prefer=Selector(events=["xid"]),
                   over=Selector(events=["cuda_error"]), scope="node", window="5m"),
)

PORT_OVER_RETRY = PrecedenceRule(
    kind="precedence", id="p.port_over_retry", title="t",
    prefer=Selector(roles=["root_candidate"], causes=["network.link_down"]),
    over=Selector(causes=["network.transport_retry_exceeded"]), scope="attempt", window="30m",
)
"""A link-down outranks the NCCL retry errors it causes: they become its confirmations."""


def pack(**kw):
    base = dict(extract=(), suppress=SUPPRESS, precedence=PRECEDENCE, metric=(), state=STATE_RULES, python=(),
                files=(), version="test")
    return RulePack(**(base | kw))


def full_coverage(att: pl.DataFrame) -> pl.DataFrame:
    return att.select("attempt_id").with_columns(
        pl.lit([{"source": "syslog", "rows": 10, "error": None}]).alias("coverage"),
        pl.lit(True).alias("coverage_complete"),
    )


def verdict(att, ev, cov=None, p=None, config=None):
    verdicts, correlated = attribute(att, ev, cov if cov is not None else full_coverage(att),
                                     p or pack(), config or EngineConfig())
    return {r["attempt_id"]: r for r in verdicts.to_dicts()}, correlated


def test_root_on_one_node_and_cascades_on_others():
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2", "n3"]})
    ev = events(
        {"node": "n2", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10), "gpu": "0000:3b:00",
         "action": "drain_node_and_restart"},
        {"node": "n1", "event": "nccl_timeout", "domain": "network", "cause": "network.collective_timeout",
         "role": "cascade", "ts": at(20), "attempt_id": "a", "rank": 3, "source": "app"},
        {"node": "n3", "event": "nccl_timeout", "domain": "network", "cause": "network.collective_timeout",
         "role": "cascade", "ts": at(20), "attempt_id": "a", "rank": 17, "source": "app"},
    )
    v, _ = verdict(att, ev)
    a = v["a"]
    assert (a["domain"], a["cause"], a["quality"]) == ("gpu", "gpu.fallen_off_bus", "definitive")
    assert a["culprit_nodes"] == ["n2"] and a["culprit_gpus"] == ["0000:3b:00"]
    assert a["affected_nodes"] == ["n1", "n3"]
    assert a["recommended_action"] == "drain_node_and_restart"
    assert a["fault_to_end_s"] == pytest.approx(50 * 60)
    assert [e["role"] for e in a["evidence"]][:3] == ["root_candidate", "cascade", "cascade"]


def test_node_event_outside_window_does_not_attach():
    att = attempts({"attempt_id": "a", "start_ts": at(0), "end_ts": at(60)})
    ev = events({"event": "xid", "ts": at(60 + 11)}, {"event": "xid", "ts": at(-31), "origin": "g:1"})
    v, correlated = verdict(att, ev)
    assert correlated.filter(pl.col("source") != "scheduler").is_empty()
    assert (v["a"]["domain"], v["a"]["quality"]) == ("unknown", "insufficient")
    assert v["a"]["cause"] == "unknown.no_evidence"


def test_cascade_never_replaces_earlier_root_and_only_symptoms_is_insufficient():
    att = attempts({"attempt_id": "a"}, {"attempt_id": "b", "nodes": ["n9"]})
    ev = events(
        {"event": "nccl_timeout", "role": "cascade", "domain": "network", "cause": "network.collective_timeout",
         "attempt_id": "b", "node": "n9", "ts": at(5)},
    )
    v, _ = verdict(att, ev)
    assert (v["b"]["domain"], v["b"]["cause"], v["b"]["quality"]) == ("unknown", "unknown.symptoms_only", "insufficient")
    assert v["b"]["affected_nodes"] == ["n9"]


def test_competing_roots_in_different_domains_are_ambiguous():
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]})
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10), "gpu": "0000:3b:00"},
        {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down",
         "ts": at(10) + (at(0.05) - at(0)), "port": "mlx5_0:1"},
        # The same port fault reported by a second rule: one alternative.
        {"node": "n2", "event": "port_down", "domain": "network", "cause": "network.link_down",
         "ts": at(10) + (at(0.06) - at(0)), "port": "mlx5_0:1", "rule_id": "r2", "origin": "n2:2"},
    )
    v, _ = verdict(att, ev)
    assert v["a"]["quality"] == "ambiguous"
    assert [(x["domain"], x["node"]) for x in v["a"]["alternatives"]] == [("network", "n2")]
    # Every suspect is a culprit until ruled out: the rival's node, GPU and port too.
    assert v["a"]["culprit_nodes"] == ["n1", "n2"]
    assert (v["a"]["culprit_gpus"], v["a"]["culprit_ports"]) == (["0000:3b:00"], ["mlx5_0:1"])


def test_roots_far_apart_are_ordered_and_same_domain_on_two_nodes_blames_both():
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]}, {"attempt_id": "b", "nodes": ["n3", "n4"]})
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10)},
        {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down", "ts": at(12)},
        {"node": "n3", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10)},
        {"node": "n4", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10.02)},
    )
    v, _ = verdict(att, ev)
    assert v["a"]["domain"] == "gpu" and v["a"]["alternatives"] == [] and v["a"]["quality"] == "probable"
    assert v["b"]["culprit_nodes"] == ["n3", "n4"] and v["b"]["quality"] == "probable"


def test_one_cause_on_two_nodes_corroborated_is_probable_at_most():
    """Two GPUs off the bus a second apart, the other ranks' timeouts their cascade: the
    cause is certain, which of the two broke the job is not; one GPU alone is definitive."""
    att = attempts({"attempt_id": "two", "nodes": ["n1", "n2", "n3"]}, {"attempt_id": "one", "nodes": ["n4", "n5"]})
    timeout = {"event": "nccl_timeout", "domain": "network", "cause": "network.collective_timeout", "role": "cascade",
               "ts": at(20), "rank": 17, "source": "app"}
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10)},
        {"node": "n2", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10.02)},
        {**timeout, "node": "n3", "attempt_id": "two"},
        {"node": "n4", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10)},
        {**timeout, "node": "n5", "attempt_id": "one"},
    )
    v, _ = verdict(att, ev)
    assert (v["two"]["culprit_nodes"], v["two"]["quality"]) == (["n1", "n2"], "probable")
    assert (v["one"]["culprit_nodes"], v["one"]["quality"]) == (["n4"], "definitive")


def test_suppress_turns_cuda_error_into_cascade_and_precedence_into_confirmation():
    att = attempts({"attempt_id": "a", "nodes": ["n1"]})
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(10)},
        {"node": "n1", "event": "cuda_error", "domain": "workload", "cause": "workload.cuda_error",
         "ts": at(9.9), "attempt_id": "a", "source": "app"},
    )
    v, correlated = verdict(att, ev)
    cuda = correlated.filter(pl.col("event") == "cuda_error").row(0, named=True)
    assert cuda["role"] == "cascade" and cuda["caused_by"].startswith("r@")
    assert v["a"]["domain"] == "gpu"
    only_precedence = pack(suppress=())
    v, correlated = verdict(att, ev, p=only_precedence)
    assert correlated.filter(pl.col("event") == "cuda_error")["role"].to_list() == ["confirmation"]
    assert v["a"]["domain"] == "gpu" and v["a"]["quality"] == "definitive"


def test_state_fallback_and_corroboration():
    att = attempts(
        {"attempt_id": "t", "state": "timeout", "raw_state": "TIMEOUT"},
        {"attempt_id": "t2", "state": "timeout", "raw_state": "TIMEOUT"},
        {"attempt_id": "ok", "state": "completed", "raw_state": "COMPLETED"},
        {"attempt_id": "nf", "state": "node_fail", "raw_state": "NODE_FAIL"},
    )
    ev = events({"event": "time_limit_line", "domain": "scheduler", "cause": "scheduler.time_limit",
                 "attempt_id": "t2", "ts": at(60), "source": "app"})
    cov = full_coverage(att).with_columns(
        pl.when(pl.col("attempt_id") == "nf").then(False).otherwise(pl.col("coverage_complete")).alias("coverage_complete")
    )
    v, _ = verdict(att, ev, cov)
    assert (v["t"]["cause"], v["t"]["quality"], v["t"]["recommended_action"]) == (
        "scheduler.time_limit", "probable", "increase_time_limit")
    assert (v["t2"]["cause"], v["t2"]["quality"]) == ("scheduler.time_limit", "definitive")
    assert (v["ok"]["domain"], v["ok"]["responsibility"], v["ok"]["quality"]) == ("none", "none", "definitive")
    assert (v["nf"]["cause"], v["nf"]["quality"]) == ("host.node_failure", "insufficient")
    assert v["t"]["evidence"][0]["source"] == "scheduler"
    # The one node of a NODE_FAIL attempt is its culprit; a time limit names none.
    assert (v["nf"]["culprit_nodes"], v["t"]["culprit_nodes"]) == (["n1"], [])


def test_a_requeue_banner_yields_to_the_node_failure_slurm_recorded():
    """Slurm requeued both attempts; one it recorded as lost to its node (NODE_FAIL): the
    banner of the requeue is the root of the other only."""
    att = attempts({"attempt_id": "nf", "state": "node_fail", "raw_state": "NODE_FAIL"},
                   {"attempt_id": "rq", "state": "preempted", "raw_state": "REQUEUED"})
    banner = {"event": "scheduler.requeued", "domain": "scheduler", "cause": "scheduler.requeued", "source": "app"}
    ev = events(banner | {"attempt_id": "nf", "ts": at(50)}, banner | {"attempt_id": "rq", "ts": at(50), "origin": "b:1"})
    v, _ = verdict(att, ev, p=pack(state=(*STATE_RULES, StateRule(
        kind="state", id="state.preempted", title="t", states=["preempted"], event="preempted", domain="scheduler",
        cause="scheduler.preempted"))))
    assert (v["nf"]["cause"], v["nf"]["culprit_nodes"]) == ("host.node_failure", ["n1"])
    assert v["rq"]["cause"] == "scheduler.requeued"


def test_a_lost_attempt_of_several_nodes_names_none_of_them_without_a_line():
    att = attempts({"attempt_id": "nf", "state": "node_fail", "raw_state": "NODE_FAIL", "nodes": ["n1", "n2"], "n_nodes": 2})
    v, _ = verdict(att, events({"attempt_id": "other", "ts": at(0)}).head(0))
    assert (v["nf"]["cause"], v["nf"]["culprit_nodes"]) == ("host.node_failure", [])


def test_link_that_came_back_before_the_failure_is_not_the_root():
    att = attempts({"attempt_id": "a"}, {"attempt_id": "b", "nodes": ["n2"]})
    ev = events(
        {"event": "link_down", "domain": "network", "cause": "network.link_down", "ts": at(10), "port": "mlx5_0:1"},
        {"event": "link_up", "domain": "network", "cause": "network.link_up", "role": "context", "ts": at(10.1),
         "port": "mlx5_0:1"},
        {"event": "nccl_timeout", "role": "cascade", "domain": "network", "cause": "network.collective_timeout",
         "attempt_id": "a", "ts": at(30), "source": "app"},
        {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down", "ts": at(10),
         "port": "mlx5_0:1"},
        {"node": "n2", "event": "nccl_timeout", "role": "cascade", "domain": "network",
         "cause": "network.collective_timeout", "attempt_id": "b", "ts": at(11), "source": "app"},
        {"node": "n2", "event": "link_up", "domain": "network", "cause": "network.link_up", "role": "context",
         "ts": at(12), "port": "mlx5_0:1"},
    )
    v, _ = verdict(att, ev)
    assert v["a"]["domain"] == "unknown"
    assert (v["b"]["cause"], v["b"]["culprit_ports"]) == ("network.link_down", ["mlx5_0:1"])


def test_a_port_error_or_transmit_timeout_the_job_outlived_is_not_the_root():
    """NCCL's "Got async event : port error" (no port in older releases) and a NIC's
    transmit timeout both end when a link of the node comes back up: a job that trained on
    for hours and hit its time limit did not fail of them. A transmit timeout that never
    recovered stays the root."""
    att = attempts(*({"attempt_id": a, "nodes": [n], "state": "timeout", "raw_state": "TIMEOUT", "end_ts": at(300)}
                     for a, n in (("a", "n1"), ("b", "n2"), ("c", "n3"))))
    up = {"event": "link_up", "domain": "network", "cause": "network.link_up", "role": "context"}
    ev = events(
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "ib_port_error", "domain": "network",
         "cause": "network.link_flap", "ts": at(40), "origin": "a.out:7"},
        up | {"node": "n1", "attempt_id": "a", "source": "app", "ts": at(40.2), "port": "mlx5_0:1", "origin": "a.out:8"},
        {"node": "n2", "event": "nic_tx_timeout", "domain": "network", "cause": "network.nic_tx_timeout", "ts": at(70),
         "origin": "n2:3"},
        up | {"node": "n2", "ts": at(70.1), "origin": "n2:4"},
        {"node": "n3", "event": "nic_tx_timeout", "domain": "network", "cause": "network.nic_tx_timeout", "ts": at(70),
         "origin": "n3:3"},
    )
    v, _ = verdict(att, ev)
    assert v["a"]["cause"] == v["b"]["cause"] == "scheduler.time_limit"
    assert (v["c"]["cause"], v["c"]["culprit_nodes"]) == ("network.nic_tx_timeout", ["n3"])


def _flap(port: str) -> tuple[dict, dict]:
    """``port`` going down at 10 min and back up 6 s later."""
    return (
        {"event": "link_down", "domain": "network", "cause": "network.link_down", "ts": at(10), "port": port},
        {"event": "link_up", "domain": "network", "cause": "network.link_up", "role": "context", "ts": at(10.1),
         "port": port},
    )


def test_a_flap_the_ranks_aborted_on_within_seconds_stays_the_root():
    """No NET/IB error was logged (the launcher shows local rank 0 only), but the ranks on
    the node aborted 20 s after the port came back: the job felt the flap."""
    att = attempts({"attempt_id": "a"})
    ev = events(
        *_flap("mlx5_3:1"),
        {"event": "elastic_worker_failed", "role": "cascade", "domain": "workload", "cause": "workload.worker_failed",
         "attempt_id": "a", "ts": at(10.43), "source": "app"},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["culprit_ports"]) == ("network.link_down", ["mlx5_3:1"])


def _felt_flap(port: str, *downs: dict) -> pl.DataFrame:
    """Attempt ``a``'s events around a flap: the link-down lines ``downs`` (from 10 min),
    ``port`` back up 6 s later, a NCCL NET/IB retry error between, the watchdog at 20 min."""
    down, up = _flap(port)
    return events(
        *(down | {"port": None} | d for d in downs),
        up,
        {"event": "nccl_ib_completion_error", "domain": "network", "cause": "network.transport_retry_exceeded",
         "attempt_id": "a", "ts": at(10.05), "source": "app"},
        {"event": "nccl_timeout", "role": "cascade", "domain": "network", "cause": "network.collective_timeout",
         "attempt_id": "a", "ts": at(20)},
    )


def test_a_flapping_link_the_application_felt_stays_the_root():
    """The port came back up before the watchdog fired, but NCCL reported NET/IB retry
    errors meanwhile (confirmations of the link-down): the flap broke the job's traffic."""
    att = attempts({"attempt_id": "a"})
    ev = _felt_flap("mlx5_0:1", {"ts": at(10), "port": "mlx5_0:1"})
    v, correlated = verdict(att, ev, p=pack(precedence=(*PRECEDENCE, PORT_OVER_RETRY)))
    assert (v["a"]["cause"], v["a"]["culprit_ports"]) == ("network.link_down", ["mlx5_0:1"])
    assert correlated.filter(pl.col("event") == "nccl_ib_completion_error")["role"].to_list() == ["confirmation"]


def test_a_felt_flap_keeps_its_port_when_the_errors_link_to_the_netdev_line():
    """The kernel reports one flap twice: the netdev's "Link down" (no port) and the HCA
    port's "Port: 1 Link DOWN" a few ms later. The NET/IB errors confirm the first; the
    port's line stays a root too, so the verdict names the port."""
    att = attempts({"attempt_id": "a"})
    ev = _felt_flap("mlx5_1:1", {"ts": at(10)}, {"ts": at(10.0001), "port": "mlx5_1:1"})
    v, _ = verdict(att, ev, p=pack(precedence=(*PRECEDENCE, PORT_OVER_RETRY)))
    assert (v["a"]["cause"], v["a"]["culprit_ports"]) == ("network.link_down", ["mlx5_1:1"])


def test_a_link_that_flapped_while_the_collective_hung_stays_the_root():
    """The port was back up 6 s later, but the watchdog that fired 10 minutes after the
    flap says the collective had hung since then: the job was already failing."""
    att = attempts({"attempt_id": "a"})
    ev = events(
        *_flap("mlx5_0:1"),
        {"event": "nccl_timeout", "role": "cascade", "domain": "network", "cause": "network.collective_timeout",
         "attempt_id": "a", "ts": at(20.05), "params": '{"timeout_ms":"600000"}'},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["culprit_ports"]) == ("network.link_down", ["mlx5_0:1"])


def test_two_nodes_faults_in_one_central_log_are_rivals_whatever_their_line_order():
    """A central rsyslog file holds both nodes' lines in arrival order: the kernel panic
    two seconds after the XID, on another node, still competes with it."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]})
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10),
         "origin": "central.log:40"},
        {"node": "n2", "event": "panic", "domain": "host", "cause": "host.kernel_fault", "ts": at(10) + timedelta(seconds=2),
         "origin": "central.log:41"},
    )
    v, _ = verdict(att, ev)
    assert v["a"]["quality"] == "ambiguous" and v["a"]["culprit_nodes"] == ["n1", "n2"]


def test_a_cpu_stuck_for_a_while_dates_its_stall_by_its_onset():
    """The collective hung at 10 min (the watchdog fired 600 s later); the first soft
    lockup report over a minute is stamped 78 s after that, but says the CPU had been stuck
    for 74 s: it began within the hang's margin and stays the root. Reported without its
    duration, the same stamp is too late."""
    att = attempts({"attempt_id": "a", "nodes": ["n1"], "end_ts": at(30)},
                   {"attempt_id": "b", "nodes": ["n2"], "end_ts": at(30)})
    ev = events(*(
        e for node, attempt, params in (("n1", "a", '{"stuck_s":"74"}'), ("n2", "b", "{}"))
        for e in (
            {"node": node, "event": "host.soft_lockup", "domain": "host", "cause": "host.cpu_stall", "ts": at(11.3),
             "params": params, "origin": f"{node}:1"},
            {"node": node, "attempt_id": attempt, "source": "app", "event": "nccl_timeout", "role": "cascade",
             "domain": "network", "cause": "network.collective_timeout", "ts": at(20), "origin": f"{attempt}.out:5",
             "params": '{"timeout_ms":"600000"}'},
        )
    ))
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["culprit_nodes"]) == ("host.cpu_stall", ["n1"])
    assert v["b"]["domain"] == "unknown"


def test_an_unstamped_watchdog_line_dates_the_hang_by_the_latest_moment_it_was_printed():
    """A watchdog line without a stamp was printed between its inherited stamp and the next
    stamped line: the hang it reports may have begun as late as that next stamp minus the
    timeout, so an XID before then keeps its role. A stamped watchdog line dates the hang
    exactly, and an XID long after that began is context."""
    att = attempts({"attempt_id": "a", "nodes": ["n1"], "end_ts": at(120)},
                   {"attempt_id": "b", "nodes": ["n2"], "end_ts": at(120)})
    timeout = '{"timeout_ms":"1800000"}'
    ev = events(
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "cause": "network.collective_timeout", "ts": at(0), "ts_source": "inferred",
         "origin": "a.out:5", "params": timeout},
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "teardown", "role": "cascade", "domain": "network",
         "ts": at(80), "origin": "a.out:9"},
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(45), "origin": "sys1:1"},
        {"node": "n2", "attempt_id": "b", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "cause": "network.collective_timeout", "ts": at(0), "origin": "b.out:5",
         "params": timeout},
        {"node": "n2", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(45), "origin": "sys2:1"},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["culprit_nodes"]) == ("gpu.xid", ["n1"])
    assert v["b"]["cause"] != "gpu.xid"


def test_missing_coverage_lowers_quality_and_is_reported():
    att = attempts({"attempt_id": "a"})
    ev = events({"event": "xid", "ts": at(10)},
                {"event": "nccl_timeout", "role": "cascade", "domain": "network", "ts": at(20), "attempt_id": "a"})
    cov = att.select("attempt_id").with_columns(
        pl.lit([{"source": "node_logs", "rows": 0, "error": "no syslog rows for n1"}]).alias("coverage"),
        pl.lit(False).alias("coverage_complete"),
    )
    v, _ = verdict(att, ev, cov)
    assert v["a"]["quality"] == "probable"
    assert v["a"]["coverage"][0]["error"] == "no syslog rows for n1"


def test_deterministic_regardless_of_input_order():
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]}, {"attempt_id": "b", "nodes": ["n2"]})
    ev = events(
        {"node": "n1", "event": "xid", "ts": at(10)},
        {"node": "n2", "event": "xid", "ts": at(11)},
        {"node": "n2", "event": "nccl_timeout", "role": "cascade", "ts": at(20), "attempt_id": "a"},
    )
    first, _ = attribute(att, ev, full_coverage(att), pack(), EngineConfig())
    second, _ = attribute(att.reverse(), ev.reverse(), full_coverage(att).reverse(), pack(), EngineConfig())
    assert first.equals(second)


def test_unstamped_app_line_does_not_beat_a_stamped_kernel_line():
    """An NCCL error line without a stamp inherits the job's first stamp: it can have been
    printed any time until the next stamped line, so the stamped link-down wins."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]}, {"attempt_id": "b", "nodes": ["n3"]})
    ev = events(
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "ib_retry", "domain": "network",
         "cause": "network.transport_retry_exceeded", "ts": at(1), "ts_source": "inferred", "origin": "job.out:7"},
        {"node": "n2", "event": "link_down", "domain": "network", "cause": "network.link_down", "ts": at(40),
         "port": "mlx5_1:1"},
        # In b the stamped line after the unstamped one bounds it: the unstamped error is first.
        {"node": "n3", "attempt_id": "b", "source": "app", "event": "oom", "domain": "workload",
         "cause": "workload.cuda_oom", "ts": at(1), "ts_source": "inferred", "origin": "b.out:3"},
        {"node": "n3", "attempt_id": "b", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "ts": at(2), "origin": "b.out:9"},
        {"node": "n3", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(30), "origin": "sys:1"},
    )
    v, correlated = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["culprit_nodes"]) == ("network.link_down", ["n2"])
    assert v["b"]["cause"] == "workload.cuda_oom"
    bounds = correlated.filter(pl.col("origin") == "b.out:3").select("ts", "ts_hi").row(0)
    assert bounds == (at(1), at(2))


def test_an_unstamped_line_spanning_the_root_competes_with_it():
    """An unstamped CUDA OOM known only to lie between two stamped lines of its file cannot be
    ordered against a stamped XID of another node within that span: ambiguous, the OOM an
    alternative. An OOM whose span ends before the XID is simply first; one on the XID's own
    node may be its consequence, so it does not compete."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]}, {"attempt_id": "b", "nodes": ["n3", "n4"]},
                   {"attempt_id": "c", "nodes": ["n5"]})
    ev = events(
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "oom", "domain": "workload",
         "cause": "workload.cuda_oom", "ts": at(1), "ts_source": "inferred", "origin": "a.out:3"},
        {"node": "n1", "attempt_id": "a", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "ts": at(50), "origin": "a.out:9"},
        {"node": "n2", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(30), "origin": "sys2:1"},
        {"node": "n3", "attempt_id": "b", "source": "app", "event": "oom", "domain": "workload",
         "cause": "workload.cuda_oom", "ts": at(1), "ts_source": "inferred", "origin": "b.out:3"},
        {"node": "n3", "attempt_id": "b", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "ts": at(20), "origin": "b.out:9"},
        {"node": "n4", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(30), "origin": "sys4:1"},
        {"node": "n5", "attempt_id": "c", "source": "app", "event": "oom", "domain": "workload",
         "cause": "workload.cuda_oom", "ts": at(1), "ts_source": "inferred", "origin": "c.out:3"},
        {"node": "n5", "attempt_id": "c", "source": "app", "event": "nccl_timeout", "role": "cascade",
         "domain": "network", "ts": at(50), "origin": "c.out:9"},
        {"node": "n5", "event": "xid", "domain": "gpu", "cause": "gpu.xid", "ts": at(30), "origin": "sys5:1"},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["quality"]) == ("gpu.xid", "ambiguous")
    assert [(x["domain"], x["node"]) for x in v["a"]["alternatives"]] == [("workload", "n1")]
    assert (v["b"]["cause"], v["b"]["alternatives"]) == ("workload.cuda_oom", [])
    assert (v["c"]["cause"], v["c"]["alternatives"]) == ("gpu.xid", [])


def test_an_unstamped_line_below_the_root_in_its_file_does_not_compete():
    """NCCL's teardown error from another node, printed below slurmstepd's time-limit banner
    in the job's output, inherited the banner's stamp: its span covers the banner (a), or,
    as the attempt ended at the banner, lies within the clock skew of it (c), but the file
    says it came after. The same line in another file still competes (b)."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"], "state": "timeout"},
                   {"attempt_id": "b", "nodes": ["n3", "n4"], "state": "timeout"},
                   {"attempt_id": "c", "nodes": ["n5", "n6"], "state": "timeout", "end_ts": at(40)})
    ev = []
    for attempt, (banner_node, peer), nccl_origin in (("a", ("n1", "n2"), "a.out:11"), ("b", ("n3", "n4"), "b.err:1"),
                                                      ("c", ("n5", "n6"), "c.out:11")):
        ev += [
            {"node": banner_node, "attempt_id": attempt, "source": "app", "event": "time_limit_banner",
             "domain": "scheduler", "cause": "scheduler.time_limit", "ts": at(40), "origin": f"{attempt}.out:10"},
            {"node": peer, "attempt_id": attempt, "source": "app", "event": "ib_retry", "domain": "network",
             "cause": "network.transport_retry_exceeded", "ts": at(40), "ts_source": "inferred",
             "origin": nccl_origin},
            {"node": banner_node, "attempt_id": attempt, "source": "app", "event": "progress", "role": "context",
             "domain": "workload", "ts": at(55), "origin": f"{attempt}.out:12"},
        ]
    v, _ = verdict(att, events(*ev))
    for attempt in ("a", "c"):
        assert (v[attempt]["cause"], v[attempt]["quality"], v[attempt]["alternatives"]) == (
            "scheduler.time_limit", "definitive", [])
    assert (v["b"]["cause"], v["b"]["quality"]) == ("scheduler.time_limit", "ambiguous")
    assert [(x["cause"], x["node"]) for x in v["b"]["alternatives"]] == [("network.transport_retry_exceeded", "n4")]


def test_lines_of_one_file_are_ordered_by_line_number_when_stamps_tie():
    """Unstamped lines that inherited one stamp are still ordered by their place in the file."""
    att = attempts({"attempt_id": "a"})
    ev = events(
        {"attempt_id": "a", "source": "app", "event": "disk_full", "domain": "storage",
         "cause": "storage.disk_full", "ts": at(1), "ts_source": "inferred", "origin": "job.out:102"},
        {"attempt_id": "a", "source": "app", "event": "oom", "domain": "workload",
         "cause": "workload.cuda_oom", "ts": at(1), "ts_source": "inferred", "origin": "job.out:105"},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["quality"], v["a"]["alternatives"]) == ("storage.disk_full", "probable", [])


def test_an_unstamped_report_on_the_roots_node_spanning_it_names_its_rank():
    """The kernel's segfault report names the process, not the rank; the rank's own
    faulthandler line, unstamped, may be the same moment: same node, same domain, its rank
    is the culprit. On another node it is not the same process."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]}, {"attempt_id": "b", "nodes": ["n3", "n4"]})
    ev = []
    for attempt, kernel_node, rank_node in (("a", "n2", "n2"), ("b", "n4", "n3")):
        ev += [
            {"node": kernel_node, "event": "segfault", "domain": "workload", "cause": "workload.segfault", "ts": at(30),
             "origin": f"{kernel_node}.log:5"},
            {"node": rank_node, "attempt_id": attempt, "source": "app", "event": "faulthandler", "domain": "workload",
             "cause": "workload.segfault", "rank": 12, "ts": at(20), "ts_source": "inferred", "origin": f"{attempt}.out:7"},
            {"node": rank_node, "attempt_id": attempt, "source": "app", "event": "progress", "role": "context",
             "domain": "workload", "ts": at(40), "origin": f"{attempt}.out:9"},
        ]
    v, _ = verdict(att, events(*ev))
    assert (v["a"]["cause"], v["a"]["culprit_ranks"]) == ("workload.segfault", [12])
    assert v["b"]["culprit_ranks"] == []


def test_a_stamped_line_of_another_node_below_the_root_in_the_jobs_output_is_no_rival():
    """srun's unstamped "Node failure on n2" and, below it in the job's output, slurmstepd's
    requeue banner stamped on n1: srun wrote them in that order, so the banner came after.
    In a central syslog server's file (b) the order they arrived in proves nothing."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"], "state": "node_fail"},
                   {"attempt_id": "b", "nodes": ["n3", "n4"], "state": "node_fail"})
    ev = []
    for attempt, (lost, batch), source in (("a", ("n2", "n1"), "app"), ("b", ("n4", "n3"), "syslog")):
        ev += [
            {"node": batch, "attempt_id": attempt, "source": source, "event": "progress", "role": "context",
             "domain": "workload", "ts": at(30), "origin": f"{attempt}.out:37"},
            {"node": lost, "attempt_id": attempt, "source": source, "event": "node_failure", "domain": "host",
             "cause": "host.node_failure", "ts": at(30), "ts_source": "inferred", "origin": f"{attempt}.out:38"},
            {"node": batch, "attempt_id": attempt, "source": source, "event": "requeue_banner", "domain": "scheduler",
             "cause": "scheduler.requeued", "ts": at(35), "origin": f"{attempt}.out:39"},
        ]
    v, _ = verdict(att, events(*ev))
    # No rival: probable, as a node that stopped answering always is (it says not why).
    assert (v["a"]["cause"], v["a"]["quality"], v["a"]["culprit_nodes"]) == ("host.node_failure", "probable", ["n2"])
    assert [x["cause"] for x in v["b"]["alternatives"]] == ["scheduler.requeued"]


def test_a_trimmed_evidence_keeps_one_line_of_each_rule_before_a_second_of_any():
    """Sixty ranks' timeouts do not crowd out the one line of another rule: each rule's
    first event comes before any rule's second when the evidence is trimmed."""
    att = attempts({"attempt_id": "a", "nodes": ["n1", "n2"]})
    ev = events(
        {"node": "n1", "event": "xid", "domain": "gpu", "cause": "gpu.fallen_off_bus", "ts": at(10), "rule_id": "xid"},
        *({"node": "n2", "event": "nccl_timeout", "domain": "network", "cause": "network.collective_timeout",
           "role": "cascade", "ts": at(20), "attempt_id": "a", "rank": r, "source": "app", "rule_id": "wd",
           # each rank waited its own milliseconds: no two lines fold into one
           "params": f'{{"ran_ms":"{600000 + r}"}}', "origin": f"out:{r}"} for r in range(60)),
        {"node": "n2", "event": "lustre_lost", "domain": "storage", "cause": "storage.filesystem_unavailable",
         "role": "context", "ts": at(25), "rule_id": "lustre"},
    )
    v, _ = verdict(att, ev, config=EngineConfig(evidence_limit=10))
    rules = [e["rule_id"] for e in v["a"]["evidence"]]
    assert len(rules) == 10 and {"xid", "lustre"} <= set(rules)
    assert rules.count("wd") == 7  # the state event is the tenth


def test_an_event_of_the_incident_asking_for_the_gpus_replacement_sets_the_action():
    """A double-bit error (reset the GPU) and, in the same second on that GPU, the row
    remapping that failed (no spare rows left): one incident, and the GPU must go."""
    att = attempts({"attempt_id": "a", "nodes": ["n1"]})
    ev = events(
        {"node": "n1", "event": "xid_48", "domain": "gpu_memory", "cause": "gpu_memory.uncorrectable_ecc", "ts": at(10),
         "gpu": "0000:3b:00", "action": "reset_gpu_and_restart"},
        {"node": "n1", "event": "xid_64", "domain": "gpu_memory", "cause": "gpu_memory.row_remap_failure",
         "ts": at(10), "gpu": "0000:3b:00", "action": "replace_gpu"},
    )
    v, _ = verdict(att, ev)
    assert (v["a"]["cause"], v["a"]["recommended_action"]) == ("gpu_memory.uncorrectable_ecc", "replace_gpu")
    alone, _ = verdict(att, ev.head(1))
    assert alone["a"]["recommended_action"] == "reset_gpu_and_restart"
