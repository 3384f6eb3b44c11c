"""Attribution engine: rules, extract → correlate → decide, results, CLI."""

import os

# Polars' allocator (jemalloc, configured by ``_RJEM_MALLOC_CONF``) ships set to hand freed
# pages back to the system after half a second. A run frees and re-allocates hundreds of MB
# per chunk, and faulting those pages in again was half of its system time; kept for 5 s
# they serve the next allocations instead (README, "Performance"). Read when Polars loads,
# so it is set before; a setting of the user's own wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000")
