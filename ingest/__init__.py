"""Connectors and the lake: everything that turns raw inputs into Parquet partitions."""

import os

# Polars' allocator (jemalloc, configured by ``_RJEM_MALLOC_CONF``) ships set to hand freed
# pages back to the system after half a second. Landing and attribution free and
# re-allocate hundreds of MB per batch or chunk, and faulting those pages in again (the
# kernel zeroes each one) was a third of their system time; kept for 10 s they serve the
# next allocations instead. Transparent huge pages (``thp:always``) are not asked for: the
# kernel then zeroes 2 MB for every extent touched, a fifth of a landing's CPU time
# (README, "Performance"). It is read when Polars loads, so it is set on importing
# ``ingest`` (or ``engine``, which imports ``ingest`` first) before Polars; a setting of the
# user's own wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10000")
