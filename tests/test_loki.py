"""Loki connector against a local stand-in for Loki's HTTP API.

No real Loki runs here: every test serves Loki's documented ``query_range`` wire format
(``{"status":"success","data":{"resultType":"streams","result":[{"stream":{…},"values":
[["<ns>","line"],…]}],"stats":{…}}}``; ``start`` inclusive, ``end`` exclusive, ``limit``
default 100, ``max_entries_limit_per_query`` cap 5000 answered with HTTP 400) from a small
``http.server`` on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone

import polars as pl
import pytest

from ingest.connectors.base import ConnectorError, FetchWindow, TransientError
from ingest.connectors.loki import LokiConnector, LokiOptions, build_logql
from ingest.lake import Lake
from ingest.schema import OBSERVATIONS
from tests.local_http import serve

# Real kernel lines (sources beside each) placed on two hosts.
XID_79 = (  # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1045 (shape of xid_109 line)
    "NVRM: Xid (PCI:0000:07:00): 109, pid=326, name=modprobe, channel 0x00000007, "
    "errorString CTX SWITCH TIMEOUT, Info 0x74007"
)
XID_45 = (  # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150
    "NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145"
)
XID_149 = (  # https://github.com/leptonai/gpud/pull/1174
    "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 "
    "(0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
)

T0_NS = 1796050800_000000000  # 2026-11-30T15:00:00Z
SEC = 1_000_000_000
WINDOW = FetchWindow(
    start=datetime(2026, 11, 30, 15, 0, tzinfo=timezone.utc),
    end=datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc),
    nodes=["gpu-node-001", "gpu-node-002"],
)


class FakeLoki:
    """Stores streams and answers ``/loki/api/v1/query_range`` like Loki does.

    ``script`` is a list of canned answers ``(status, headers, body)`` served before the
    real ones (``"forever"`` as its last element repeats it); ``requests`` records each
    request's parameters and headers.
    """

    def __init__(self, streams: list[dict], cap: int = 5000):
        self.streams = streams
        self.cap = cap
        self.script: list = []
        self.requests: list[dict] = []

    def answer(self, params: dict[str, str]) -> tuple[int, dict, bytes]:
        if self.script:
            step = self.script[0]
            if step == "forever":
                step = self.script[1]
            else:
                self.script.pop(0)
            return step
        limit = int(params.get("limit", 100))
        if limit > self.cap:
            msg = f"max entries limit per query exceeded, limit > max_entries_limit ({limit} > {self.cap})"
            return 400, {}, msg.encode()
        start, end = int(params["start"]), int(params["end"])
        wanted = _selector(params["query"])
        entries = []
        for s in self.streams:
            if all(ok(s["stream"].get(k, "")) for k, ok in wanted.items()):
                key = json.dumps(s["stream"], sort_keys=True)
                entries += [(int(ns), key, line) for ns, line in s["values"] if start <= int(ns) < end]
        entries.sort(key=lambda e: (e[0], e[1]))  # forward
        entries = entries[:limit]
        grouped: dict[str, list] = {}
        for ns, key, line in entries:
            grouped.setdefault(key, []).append([str(ns), line])
        result = [{"stream": json.loads(k), "values": v} for k, v in grouped.items()]
        body = {"status": "success", "data": {
            "resultType": "streams", "result": result,
            "stats": {"summary": {"totalEntriesReturned": len(entries)}},
        }}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _selector(query: str) -> dict:
    """LogQL stream selector → label predicates (``=`` and anchored ``=~``)."""
    inner = query[query.index("{") + 1 : query.index("}")]
    out = {}
    for name, op, quoted in re.findall(r'(\w+)\s*(=~|=)\s*("(?:[^"\\]|\\.)*")', inner):
        value = json.loads(quoted)
        out[name] = (lambda v, r=value: re.fullmatch(r, v) is not None) if op == "=~" else (
            lambda v, x=value: v == x)
    return out


@pytest.fixture
def loki():
    """Start a FakeLoki on 127.0.0.1 (free port); yields ``(fake, url)``."""
    fake = FakeLoki([])

    def answer(path: str, params: dict, headers: dict) -> tuple[int, dict, bytes]:
        fake.requests.append({"params": params, "headers": headers})
        return fake.answer(params)

    with serve(answer) as url:
        yield fake, url


def _options(url: str, **kw) -> LokiOptions:
    return LokiOptions(url=url, max_attempts=3, **kw)


def _fetch(opts: LokiOptions, window=WINDOW) -> pl.DataFrame:
    connector = LokiConnector(opts, cluster="c1")
    connector_batches = list(connector.fetch(window))
    assert len(connector_batches) == 1 and connector_batches[0].source == "loki"
    return connector_batches[0].rows


def _stream(host: str, values: list[tuple[int, str]], **labels) -> dict:
    return {"stream": {"cluster": "c1", "host": host, "job": "syslog", **labels},
            "values": [[str(ns), line] for ns, line in values]}


def test_logql_selects_window_nodes_with_escaped_names():
    opts = LokiOptions(url="http://x", node_label="hostname", matchers={"job": "kernel"},
                       line_filter='NVRM: "Xid"')
    assert build_logql(opts, "c1", ["n2", "gpu-1.ib"]) == (
        '{cluster="c1", job="kernel", hostname=~"gpu-1\\\\.ib|n2"} |= "NVRM: \\"Xid\\""'
    )


def test_entries_become_observations_with_provenance(loki, tmp_path):
    fake, url = loki
    fake.streams = [
        _stream("gpu-node-001", [(T0_NS + 5 * SEC + 123, XID_149), (T0_NS + 6 * SEC, XID_45)]),
        _stream("gpu-node-002", [(T0_NS + 7 * SEC, XID_79)]),
        _stream("gpu-node-003", [(T0_NS + 5 * SEC, "other node")]),
        _stream("gpu-node-001", [(T0_NS - 1, "before start"), (T0_NS + 3600 * SEC, "at end: excluded")]),
    ]
    rows = _fetch(_options(url, program_label="job"))
    assert rows.columns == OBSERVATIONS.names
    assert rows["message"].to_list() == [XID_149, XID_45, XID_79]
    assert rows["node"].to_list() == ["gpu-node-001", "gpu-node-001", "gpu-node-002"]
    assert rows["ts_source"].unique().to_list() == ["line"] and rows["program"][0] == "syslog"
    assert rows["ts"][0] == datetime(2026, 11, 30, 15, 0, 5, tzinfo=timezone.utc)
    assert rows["origin"][0] == f'loki:{{cluster="c1", host="gpu-node-001", job="syslog"}}@{T0_NS + 5 * SEC + 123}'
    assert rows["seq"].to_list() == [0, 1, 2]
    params = fake.requests[0]["params"]
    assert params["direction"] == "forward" and params["start"] == str(T0_NS)
    assert params["end"] == str(T0_NS + 3600 * SEC)
    lake = Lake(tmp_path / "lake")
    lake.land("observations", rows, cluster="c1", input_id=rows["input_id"][0], source="loki")
    assert lake.scan("observations", sources=["loki"]).collect().height == 3


def test_paging_past_the_limit_keeps_ties_on_the_page_boundary(loki):
    fake, url = loki
    # 20 entries on two streams; with limit 4 pages end inside runs of entries sharing one
    # nanosecond across both hosts (t=10 s and t=20 s: 3 entries each): page 4 ends with
    # two of the three t=20 entries, page 5 must add the third and repeat neither.
    a = [(T0_NS + s * SEC, f"a{i}") for i, s in enumerate([1, 2, 3, 10, 10, 11, 20, 20, 30])]
    b = [(T0_NS + s * SEC, f"b{i}") for i, s in enumerate([2, 10, 12, 20, 21, 22, 23, 24, 25, 26, 40])]
    fake.streams = [_stream("gpu-node-001", a), _stream("gpu-node-002", b)]
    rows = _fetch(_options(url, limit=4))
    assert rows.height == 20
    assert sorted(rows["message"].to_list()) == sorted([x for _, x in a] + [x for _, x in b])
    assert rows["ts"].is_sorted()
    assert len(fake.requests) > 6
    assert all(r["params"]["limit"] == "4" for r in fake.requests)


def test_more_entries_at_one_nanosecond_than_the_limit_is_a_clear_error(loki):
    fake, url = loki
    fake.streams = [_stream("gpu-node-001", [(T0_NS + SEC, f"line {i}") for i in range(5)])]
    with pytest.raises(ConnectorError, match="3 or more entries share the nanosecond.*raise limit"):
        _fetch(_options(url, limit=3))


def test_limit_above_the_server_cap_is_reported_with_the_server_message(loki):
    fake, url = loki
    fake.cap = 1000
    with pytest.raises(ConnectorError, match=r"HTTP 400.*max_entries_limit \(5000 > 1000\)") as err:
        _fetch(_options(url))
    assert not isinstance(err.value, TransientError)


def test_429_then_success_is_retried(loki, monkeypatch):
    fake, url = loki
    monkeypatch.setattr("time.sleep", lambda s: None)
    fake.streams = [_stream("gpu-node-001", [(T0_NS + SEC, XID_45)])]
    fake.script = [(429, {"Retry-After": "0"}, b"Too Many Requests")]
    rows = _fetch(_options(url))
    assert rows["message"].to_list() == [XID_45] and len(fake.requests) == 2


def test_500_forever_ends_in_a_transient_error(loki, monkeypatch):
    fake, url = loki
    monkeypatch.setattr("time.sleep", lambda s: None)
    fake.script = ["forever", (500, {}, b"internal error: too many outstanding requests")]
    with pytest.raises(TransientError, match="gave up after 3 attempts.*HTTP 500"):
        _fetch(_options(url))
    assert len(fake.requests) == 3


def test_malformed_json_is_a_connector_error(loki):
    fake, url = loki
    fake.script = [(200, {"Content-Type": "application/json"}, b'{"status":"success","data":')]
    with pytest.raises(ConnectorError, match="not JSON") as err:
        _fetch(_options(url))
    assert not isinstance(err.value, TransientError)


def test_metric_query_answer_is_refused(loki):
    fake, url = loki
    body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    fake.script = [(200, {}, json.dumps(body).encode())]
    with pytest.raises(ConnectorError, match="expected resultType 'streams'"):
        _fetch(_options(url))


def test_token_is_sent_but_never_in_errors_or_logs(loki, monkeypatch, caplog):
    fake, url = loki
    secret = "s3cr3t-loki-token-value"
    monkeypatch.setenv("LOKI_TOKEN", secret)
    monkeypatch.setattr("time.sleep", lambda s: None)
    # The server echoes the header back in its error body: the message must still hide it.
    fake.script = [(503, {}, b"busy"), (401, {}, f"bad token Bearer {secret}".encode())]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConnectorError) as err:
        _fetch(_options(url, token_env="LOKI_TOKEN", org_id="tenant-a"))
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {secret}"
    assert fake.requests[0]["headers"]["x-scope-orgid"] == "tenant-a"
    assert "HTTP 401" in str(err.value) and "token_env" in str(err.value)
    assert secret not in str(err.value)
    assert caplog.records and all(secret not in r.getMessage() for r in caplog.records)
    opts = _options(url, token_env="LOKI_TOKEN")
    assert secret not in opts.model_dump_json()


def test_missing_token_variable_names_the_variable(loki, monkeypatch):
    _, url = loki
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    with pytest.raises(ConnectorError, match="NO_SUCH_TOKEN.*is not set"):
        _fetch(_options(url, token_env="NO_SUCH_TOKEN"))


def test_retry_after_is_honoured_and_backoff_grows(loki, monkeypatch):
    fake, url = loki
    delays: list[float] = []
    monkeypatch.setattr("time.sleep", delays.append)
    fake.script = [(429, {"Retry-After": "2"}, b"slow down"), (503, {}, b"busy"), (503, {}, b"busy")]
    _fetch(LokiOptions(url=url, max_attempts=4))
    assert delays[0] == 2.0
    # Exponential backoff with jitter: attempt n waits within [0.5, 1] x 0.5 s x 2^(n-1).
    assert 0.5 <= delays[1] <= 1.0 and 1.0 <= delays[2] <= 2.0


def test_unreachable_server_is_transient_after_bounded_attempts(monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    delays: list[float] = []
    monkeypatch.setattr("time.sleep", delays.append)
    with pytest.raises(TransientError, match="gave up after 3 attempts.*URLError"):
        _fetch(_options(f"http://127.0.0.1:{port}"))
    assert len(delays) == 2


def test_client_error_quotes_only_the_first_200_bytes(loki):
    fake, url = loki
    fake.script = [(400, {}, b"parse error at line 1, col 2: " + b"x" * 500)]
    with pytest.raises(ConnectorError, match="HTTP 400") as err:
        _fetch(_options(url))
    assert "x" * 170 in str(err.value) and "x" * 171 not in str(err.value)
