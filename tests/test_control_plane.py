"""A distributed job's control plane failing, end to end: the cluster's resolver down, the
etcd rendezvous service down, the store host's conntrack table full, Gloo told to use an
interface the nodes lack, and a resolver blip the job trained through. Real line formats
(PyTorch's c10d and elastic sources, the kernel's), landed through the Slurm connector and
the files landing, attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, ITERATION, XID_79, syslog, verdicts_by_job

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
700|700|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:12:00|c[1-2]|gres/gpu=16,node=2
701|701|train|alice|FAILED|1:0|2026-11-20T08:00:00|2026-11-20T10:30:00|c[3-4]|gres/gpu=16,node=2
702|702|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:03:00|c[5-6]|gres/gpu=16,node=2
703|703|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:12:00|c[7-8]|gres/gpu=16,node=2
704|704|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:02:00|c[9-10]|gres/gpu=16,node=2
"""
# torch/csrc/distributed/c10d/socket.cpp
GAI = ("[W1120 {clock}.745279220 socket.cpp:752] [c10d] The IPv4 network addresses of (c1, 29500) cannot be "
       "retrieved (gai error: -3 - Temporary failure in name resolution).")
CLIENT_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to "
                  "connect to ({store}, 29500).")
# torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py, and urllib3's error under it
ETCD = ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to etcd has failed. "
        "See inner exception for details.")
MAX_RETRY = ("urllib3.exceptions.MaxRetryError: HTTPConnectionPool(host='etcd01', port=2379): Max retries exceeded "
             "with url: /v2/keys/torch/elastic/rendezvous/702")
# net/netfilter/nf_conntrack_core.c
CONNTRACK = "kernel: nf_conntrack: nf_conntrack: table full, dropping packet"
# https://github.com/Megvii-BaseDetection/YOLOX/issues/139
GLOO_IFACE = ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
              "Unable to find address for: ib0")


def _quiet(*nodes: str, until: str = "10:11:00") -> dict[str, str]:
    return {node: syslog(node, ("09:59:00", ALIVE), (until, ALIVE)) for node in nodes}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("control")
    logs = root / "logs"
    logs.mkdir()
    nodes = _quiet("c1", "c2", "c5", "c6", "c9", "c10") | _quiet("c3", "c4", until="10:29:00")
    # 701: c4's GPU fell off the bus two hours after a resolver blip at the start.
    nodes["c4"] = syslog("c4", ("07:59:00", ALIVE), ("10:28:00", f"kernel: {XID_79}"), ("10:29:00", ALIVE))
    # 703: the store host c7 dropped its clients' connections.
    nodes |= _quiet("c8") | {"c7": syslog("c7", ("09:59:00", ALIVE), ("10:00:30", CONNTRACK), ("10:11:00", ALIVE))}
    for node, text in nodes.items():
        (logs / f"{node}.log").write_text(text)
    # 700: no rank could resolve the store's host, then gave up.
    (logs / "slurm-700.out").write_text(
        "".join(f"{rank}: {GAI.format(clock=f'10:0{rank}:00')}\n" for rank in range(1, 4))
        + f"1: [2026-11-20 10:11:00,000] {CLIENT_TIMEOUT.format(store='c1')}\n")
    (logs / "slurm-701.out").write_text(
        f"1: {GAI.format(clock='08:00:05')}\n0: [2026-11-20 08:10:00,000] {ITERATION}\n"
        f"0: [2026-11-20 10:27:00,000] {ITERATION}\n")
    (logs / "slurm-702.out").write_text(f"0: [2026-11-20 10:01:00,000] {MAX_RETRY}\n0: {ETCD}\n1: {ETCD}\n")
    (logs / "slurm-703.out").write_text(
        "".join(f"{rank}: [2026-11-20 10:10:30,000] {CLIENT_TIMEOUT.format(store='c7')}\n" for rank in range(1, 4)))
    (logs / "slurm-704.out").write_text(
        "".join(f"{rank}: [2026-11-20 10:01:00,000] {GLOO_IFACE}\n" for rank in range(2)))
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


def test_the_resolver_down_is_the_networks_and_no_nodes(verdicts):
    v = verdicts["700"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.name_resolution_failed", [])


def test_a_resolver_blip_the_job_trained_through_did_not_end_it(verdicts):
    v = verdicts["701"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("gpu", "gpu.fallen_off_bus", ["c4"])


def test_the_etcd_rendezvous_down_is_no_program_error(verdicts):
    v = verdicts["702"]
    assert (v["domain"], v["cause"]) == ("network", "network.rendezvous_backend_unreachable")


def test_a_full_conntrack_table_on_the_store_host_names_it(verdicts):
    v = verdicts["703"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("network", "network.kernel_table_full", ["c7"])


def test_gloo_told_to_use_a_missing_interface_is_the_jobs_configuration(verdicts):
    v = verdicts["704"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("workload", "workload.bad_network_config", [])
