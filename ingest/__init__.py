"""Connectors and the lake: everything that turns raw inputs into Parquet partitions."""

import os

# Polars' allocator (jemalloc, configured by ``_RJEM_MALLOC_CONF``) ships set to hand freed
# pages back to the system after half a second. A run frees and re-allocates hundreds of MB
# per chunk, and faulting those pages in again was half of its system time; kept for 5 s
# they serve the next allocations instead. Asked for transparent huge pages (``thp:always``:
# where the kernel gives them on request, its ``madvise`` mode), it faults a 2 MB page where
# it faulted 4 KB ones: a third of the faults, and a quarter less system time (README,
# "Performance"). It is read when Polars loads, so it is set on importing ``ingest`` (or
# ``engine``, which imports ``ingest`` first) before Polars; a setting of the user's own wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000,thp:always")
