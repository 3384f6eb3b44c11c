"""Attribution engine: rules, extract → correlate → decide, results, CLI."""

# Importing ``ingest`` first configures Polars' allocator before Polars loads (see there).
import ingest  # noqa: F401
