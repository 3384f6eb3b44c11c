"""A python rule file that forgets the contract function (used by python_no_apply.yaml)."""

import polars as pl


def transform(events: pl.DataFrame) -> pl.DataFrame:
    """Named wrongly: the loader looks for apply(events, context)."""
    return events
