"""Polars' allocator is configured whichever of causelake's packages a program imports first.

jemalloc reads ``_RJEM_MALLOC_CONF`` once, when Polars loads, so each case runs in a fresh
interpreter (this one has loaded Polars already). Polars puts its own defaults in front of
the value it finds; of options given twice jemalloc applies the last."""

import os
import subprocess
import sys

import pytest

DEFAULT = {"dirty_decay_ms": "10000"}


def setting_after(code: str, own: str | None = None) -> dict[str, str]:
    """The jemalloc options in force once ``code`` has run and Polars has loaded in a fresh
    interpreter, with ``own`` as the user's ``_RJEM_MALLOC_CONF``."""
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if own is not None:
        env["_RJEM_MALLOC_CONF"] = own
    probe = f"{code}\nimport os, polars\nprint(os.environ.get('_RJEM_MALLOC_CONF', ''))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return dict(option.split(":", 1) for option in done.stdout.strip().split(",") if option)


@pytest.mark.parametrize("code", ["from ingest.lake import Lake", "import engine.cli", "import ingest"])
def test_set_before_polars_loads(code):
    options = setting_after(code)
    assert options.items() >= DEFAULT.items() and "thp" not in options


def test_a_setting_of_your_own_wins():
    options = setting_after("from ingest.lake import Lake", own="dirty_decay_ms:0")
    assert options["dirty_decay_ms"] == "0"


def test_not_set_without_causelake():
    options = setting_after("pass")
    assert options.get("dirty_decay_ms") != "10000"
