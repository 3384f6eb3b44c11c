"""Engine settings: correlation windows, clock-skew tolerance, evidence size, coverage.

Defaults are chosen for synchronous training jobs on Slurm/Kubernetes clusters:

``lookback`` (30 min)
    Node events this long before an attempt started still attach to it: a GPU that threw
    XID 79 twenty minutes before the job landed on it is the likely reason it failed at once.
``fail_at_once`` (10 min)
    A root candidate from that lookback is the root only of an attempt that started failing
    within this long of its start; one that ran longer had working hardware after it.
``grace`` (10 min)
    Node events this long after an attempt ended still attach: kernels log a dying GPU or a
    panicking node after the scheduler has already marked the job dead.
``clock_skew`` (5 s)
    Stamps from different nodes can disagree by this much (NTP-synced clusters stay within
    a few ms; 5 s also covers nodes whose syslog relays add delay). Two root candidates on
    different nodes closer than this cannot be ordered, so the verdict is ``ambiguous``.
``tie_window`` (1 s)
    The same for two root candidates on one node (one clock; lines of one incident land in
    the same second).
A root candidate must start before the attempt ended (plus ``clock_skew``): what happens
after the end cannot have caused it.

``repeat_window`` (7 days)
    A node blamed for infrastructure failures of other jobs within this window is a repeat
    offender (fleet stage). Python rules see the jobs of this window before a run too
    (their ``context.history``: repeated XIDs on one GPU).
``systemic_window`` (10 min) and ``systemic_nodes`` (3)
    The same root cause on at least this many nodes within this window is a systemic event.
``quiet_horizon`` (12 h)
    A node log with no rows in an attempt's window covers it when it has rows within this
    long both before and after the window (a quiet node, not a missing log). A fixed
    horizon, not "anywhere in the days read", so the verdict does not depend on which other
    attempts share the run or its chunk; a daemon's periodic lines (cron, systemd timers,
    time sync) come far more often.
``chunk_attempts`` (50,000)
    A run attributes attempts in chunks of consecutive end days holding about this many
    attempts: memory follows the chunk, not the window. Over the simulator's million
    attempts, chunks of 50,000 peak at 3.1–3.2 GB and chunks of 100,000 at 4.3–4.6 GB
    (days of large jobs attach a million events to a chunk), in the same time.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from engine.rules.model import Duration, parse_duration

NODE_LOG_SOURCES = ("syslog", "journald", "kmsg", "loki")
"""Sources that carry a node's kernel and daemon logs."""

APP_LOG_SOURCES = ("app", "kubectl", "k8s")
"""Sources that carry a job's own output."""


class EngineConfig(BaseModel):
    """Tunable parameters of correlate and decide (durations as ``30s``, ``10m``…)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lookback: Duration = "30m"
    fail_at_once: Duration = "10m"
    grace: Duration = "10m"
    clock_skew: Duration = "5s"
    tie_window: Duration = "1s"
    evidence_limit: int = Field(50, ge=5)
    repeat_window: Duration = "7d"
    systemic_window: Duration = "10m"
    systemic_nodes: int = Field(3, ge=2)
    quiet_horizon: Duration = "12h"
    chunk_attempts: int = Field(50_000, ge=1)
    node_log_sources: tuple[str, ...] = NODE_LOG_SOURCES
    app_log_sources: tuple[str, ...] = APP_LOG_SOURCES

    def seconds(self, name: str) -> float:
        """A duration setting in seconds."""
        return parse_duration(getattr(self, name))
