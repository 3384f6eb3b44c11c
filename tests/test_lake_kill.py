"""A process killed (SIGKILL) while it lands leaves no partial file visible, and the lake it
leaves behind reads cleanly and is repaired by landing again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq

from engine.oneshot import SAMPLES, land_manifest
from ingest.lake import Lake

REPO = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from engine.oneshot import land_manifest
    from ingest.lake import Lake
    lake = Lake(sys.argv[1])
    print("ready", flush=True)
    while True:  # land the samples over and over until killed
        land_manifest(lake, Path(sys.argv[2]) / "manifest.yaml")
""")


def test_sigkill_mid_landing_leaves_only_complete_files(tmp_path):
    root = tmp_path / "lake"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(SAMPLES)], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 60
        while not any(root.rglob("*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.7)  # well inside a landing: the samples take a few seconds each round
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]

    visible = [p for p in root.rglob("*.parquet") if not p.name.startswith(".")]
    assert visible
    for path in visible:  # every file a reader can see is a whole Parquet file
        pq.read_metadata(path)
    lake = Lake(root)
    for table in ("attempts", "observations", "rejects"):
        lake.scan(table).collect()

    clean = Lake(tmp_path / "clean")
    land_manifest(clean, SAMPLES / "manifest.yaml")
    land_manifest(lake, SAMPLES / "manifest.yaml")
    for table in ("attempts", "observations", "rejects"):
        assert lake.scan(table).collect().height == clean.scan(table).collect().height, table
    assert not list(root.rglob("*.tmp"))  # the killed landing's temporary file, if it left one
