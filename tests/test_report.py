"""The HTML fleet report: content and escaping (fast), and a real headless-browser load
that draws every chart and takes a screenshot (slow)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import date

import polars as pl
import pytest

from engine.oneshot import SAMPLES, run_demo
from engine.report import _anchor, build_report, write_report
from ingest.lake import Lake

FLEET_CHARTS = 5


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory) -> Lake:
    """The sample fleet landed and attributed by the real pipeline (read-only in tests)."""
    lake = Lake(tmp_path_factory.mktemp("report-lake"))
    run_demo(lake, SAMPLES)
    return lake


def _failed(lake: Lake) -> pl.DataFrame:
    return lake.scan("results").filter(~pl.col("state").is_in(["completed", "running"])).collect()


def test_report_is_self_contained_and_links_every_failed_attempt(sample_lake):
    page = build_report(sample_lake.root, None, None)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the report must not load anything"
    assert "<link" not in page
    failed = _failed(sample_lake)["attempt_id"].to_list()
    for attempt in failed:
        anchor = _anchor(attempt)
        assert f'href="#{anchor}"' in page and f'id="{anchor}"' in page
    charts = page.count('class="chart"') + page.count('class="chart timeline"')
    assert charts == FLEET_CHARTS + len(failed)
    # Evidence of the XID 79 failure is in its section, with its provenance.
    assert "GPU has fallen off the bus" in page and "gpu003/syslog" in page


def test_report_window_limits_the_attempts(sample_lake):
    page = build_report(sample_lake.root, date(2026, 11, 29), date(2026, 11, 29))
    assert "static/demo/1013/0" in page and "static/demo/1001/0" not in page
    with pytest.raises(ValueError, match="before"):
        build_report(sample_lake.root, date(2026, 11, 29), date(2026, 11, 28))


def test_log_text_is_escaped(sample_lake, tmp_path):
    lake = Lake(tmp_path / "lake")
    results = sample_lake.scan("results", days=[date(2026, 11, 28)]).collect()
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    results = results.with_columns(
        pl.col("evidence").list.eval(pl.element().struct.with_fields(message=pl.lit(evil))),
        job_id=pl.lit('"><b>job</b>'),
    )
    lake.replace_partitions("results", results.drop("day", "cluster"), cluster="demo",
                            days=[date(2026, 11, 28)])
    page = build_report(lake.root)
    assert evil not in page and "<b>job</b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # The JSON for the charts cannot close its script element either.
    data = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data


def test_report_of_an_empty_lake(tmp_path):
    page = build_report(tmp_path)
    assert "no verdict in this window" in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_report_renders_in_headless_chromium(sample_lake, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing in CI — .ci/setup.d/30-chromium.sh installs it")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    html_path = write_report(sample_lake.root, tmp_path / "report.html")
    base = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    url = html_path.resolve().as_uri()
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The page logs nothing: any console message (an uncaught exception included) is a fault.
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    marker = re.search(r'id="charts-ready"[^>]*data-charts="(\d+)"', dom.stdout)
    assert marker, "the chart script did not finish (no #charts-ready marker in the DOM)"
    expected = FLEET_CHARTS + _failed(sample_lake).height
    assert int(marker.group(1)) == expected
    svgs = re.findall(r'<svg class="chart[^"]*".*?</svg>', dom.stdout, flags=re.S)
    assert len(svgs) == expected
    assert all(re.search(r"<(rect|circle|path)\b", svg) for svg in svgs)
    shot = tmp_path / "report.png"
    run = subprocess.run([*base, f"--screenshot={shot}", "--window-size=1400,2000", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000
