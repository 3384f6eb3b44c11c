"""The investigation notebooks run top to bottom (nbclient, kernel python3) against a lake
built from the bundled samples, and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from engine.oneshot import SAMPLES, run_demo
from ingest.lake import Lake

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory) -> Lake:
    """The sample fleet landed and attributed by the real pipeline (read-only in tests)."""
    lake = Lake(tmp_path_factory.mktemp("notebook-lake"))
    run_demo(lake, SAMPLES)
    return lake


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def test_both_notebooks_exist():
    assert {p.name for p in _notebooks()} >= {"investigate_attempt.ipynb", "fleet_overview.ipynb"}


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name}: clear the outputs"


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, sample_lake, tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSELAKE_LAKE", str(sample_lake.root))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws PNGs
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(book, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot was drawn"


def test_first_cell_builds_its_own_lake_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("CAUSELAKE_LAKE", raising=False)
    book = nbformat.read(NOTEBOOKS / "investigate_attempt.ipynb", as_version=4)
    book.cells = book.cells[:3]  # the set-up cell and the verdict
    NotebookClient(book, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert "static/demo/" in str(book.cells[2].outputs)
