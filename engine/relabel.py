"""Re-label correlated events by what happened around them: the pack's ``suppress`` and
``precedence`` rules as joins within a scope and a time window, and the engine's own
demotions (a port that came back, a fault after the hang began, a root from before the
attempt it outlived), then what they leave unlinked.

Every function takes the correlated events of :func:`engine.correlate.attach_events` (one
row per attempt and event, with the attempt columns and ``ts_hi``) and returns them with
``role`` and ``caused_by`` changed, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import polars as pl

from engine.config import NODE_LOG_SOURCES
from engine.decide import INFRASTRUCTURE, LATE_ENDS, STORY_KEY, onset, outage_rivals, reports_timeout, story_began
from engine.outages import closed, confirmed, outage, recoveries
from engine.rules.model import PrecedenceRule, Selector, SuppressRule, parse_duration
from engine.rules.python_rules import UNDECIDED_PARAM, with_param, with_role

SCOPE_KEYS = {
    "attempt": ["attempt_id"],
    "node": ["attempt_id", "node"],
    "gpu": ["attempt_id", "node", "gpu"],
    "port": ["attempt_id", "node", "port"],
}
"""The columns two events must share to be in one rule ``scope``."""


def selector_expr(selector: Selector) -> pl.Expr:
    """A boolean expression true for events the selector matches (all given lists)."""
    checks = [
        pl.col(column).is_in(values)
        for column, values in (
            ("event", selector.events),
            ("domain", selector.domains),
            ("role", selector.roles),
            ("cause", selector.causes),
            ("rule_id", selector.rules),
        )
        if values
    ]
    return pl.all_horizontal(checks)


def _pairs(
    events: pl.DataFrame, first: Selector, second: Selector, scope: str,
    reach_back: timedelta, reach_ahead: timedelta, skew: timedelta, spans: bool = True,
) -> pl.DataFrame:
    """For every event matching ``second``, the earliest other event matching ``first`` in
    the same scope that may lie within ``[ts - reach_back, ts + reach_ahead]`` of it (the
    bounds allow for events known only within ``[ts, ts_hi]``; without ``spans``, only
    their stamps, as read or inherited, are compared).

    A ``first`` event stamped after its attempt ended (beyond ``skew``) takes no role from
    another: the decision could never pick it as the attempt's root (a node whose clock
    runs far ahead puts its own XID there), so the line it would outrank keeps its role.

    An as-of join per scope, not a cross product: a 512-node job has thousands of symptoms
    and hundreds of root candidates, and pairing them all does not fit in memory. Returns
    ``_row`` (the second side's row, see :func:`_with_rows`), ``event_id_a`` and ``ts_a``
    (first side).
    """
    keys = SCOPE_KEYS[scope]
    latest = "ts_hi" if spans else "ts"
    in_time = (pl.col("ts") <= pl.col("end_ts") + skew).fill_null(True)
    # Lazy: only the few columns read are gathered for the rows kept, never the wide rows.
    firsts = (
        events.lazy().filter(selector_expr(first) & in_time)
        .select(keys + [pl.col("event_id").alias("event_id_a"), pl.col("ts").alias("ts_a"),
                        pl.col(latest).alias("ts_hi_a")])
        .drop_nulls(keys)
        .sort("ts_hi_a", "ts_a", "event_id_a")
        .collect()
    )
    seconds = (
        events.lazy().filter(selector_expr(second))
        .select(keys + ["_row", "event_id", "ts", pl.col(latest).alias("ts_hi"), (pl.col("ts") - reach_back).alias("_from")])
        .drop_nulls(keys)
        .sort("_from")
        .collect()
    )
    return (
        seconds.join_asof(firsts, left_on="_from", right_on="ts_hi_a", by=keys, strategy="forward",
                          check_sortedness=False)
        .filter(
            pl.col("event_id_a").is_not_null()
            & (pl.col("event_id") != pl.col("event_id_a"))
            & (pl.col("ts_a") <= pl.col("ts_hi") + reach_ahead)
        )
        .select("_row", "event_id_a", "ts_a")
    )


def _earliest_links(pairs: pl.DataFrame) -> pl.DataFrame:
    """``_row`` and ``_link``: each second-side row of ``pairs`` (:func:`_pairs`) with its
    earliest first-side event."""
    return pairs.group_by("_row").agg(pl.col("event_id_a").sort_by(["ts_a", "event_id_a"]).first().alias("_link"))


def _relabel(events: pl.DataFrame, pairs: list[pl.DataFrame], role: str, only_roots: bool) -> pl.DataFrame:
    """Give every second-side event of ``pairs`` the ``role`` and link it (``caused_by``)
    to its earliest first-side event; ``only_roots`` re-labels root candidates only."""
    link = _earliest_links(pl.concat(pairs))
    linked = pl.col("_link").is_not_null()
    if only_roots:
        linked = linked & (pl.col("role") == "root_candidate")
    return (
        events.join(link, on="_row", how="left", maintain_order="left")
        .with_columns(
            pl.when(linked).then(pl.lit(role)).otherwise(pl.col("role")).alias("role"),
            pl.coalesce("caused_by", "_link").alias("caused_by"),
        )
        .drop("_link", "_row")
    )


PAIR_COLUMNS = ["_row", "attempt_id", "node", "gpu", "port", "event_id", "ts", "ts_hi", "end_ts",
                "event", "domain", "role", "cause", "rule_id"]
"""The columns :func:`_pairs` reads."""


def _pair_candidates(events: pl.DataFrame, sides: list[tuple[Selector, Selector]]) -> pl.DataFrame:
    """The rows of ``events`` (with ``_row``) some selector of ``sides`` matches, in the
    columns :func:`_pairs` reads, filtered once for a set of rules instead of twice per rule
    over the wide frame (precedence reads few rows: root candidates and what outranks them)."""
    wanted = pl.any_horizontal(selector_expr(s) for side in sides for s in side)
    return events.lazy().filter(wanted).select(PAIR_COLUMNS).collect()


def _with_rows(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with ``_row``, each row's index: a correlated event is one row per
    (attempt, event), and one integer key joins far cheaper than those two strings."""
    return events.with_row_index("_row")


def _as_roots(selector: Selector) -> Selector:
    """A selector restricted to root candidates unless it names roles itself."""
    return selector if selector.roles else selector.model_copy(update={"roles": ["root_candidate"]})


def apply_suppress(events: pl.DataFrame, rules: list[SuppressRule], skew: timedelta) -> pl.DataFrame:
    """Re-label cascades: an event matching a rule's ``cascade`` selector that follows a
    root candidate matching its ``root`` selector within the window (same scope) becomes a
    ``cascade`` and records the earliest such root in ``caused_by`` (roots stamped after
    the attempt ended beyond ``skew`` excepted, see :func:`_pairs`).

    Rules see the roles as extracted (one rule's demotions do not feed another's roots),
    which keeps the outcome independent of rule order.
    """
    if events.is_empty() or not rules:
        return events
    events = _with_rows(events)
    return _relabel(events, _suppress_pairs(events, rules, skew), "cascade", only_roots=False)


def _suppress_pairs(events: pl.DataFrame, rules: list[SuppressRule], skew: timedelta) -> list[pl.DataFrame]:
    """:func:`_pairs` of each suppress rule over ``events`` (with ``_row``): its cascades
    and the root candidates they may follow."""
    sides = [(_as_roots(rule.root), rule.cascade) for rule in rules]
    candidates = _pair_candidates(events, sides)
    # A cascade follows its root within the window (stamped up to ``before`` earlier for
    # clock skew); either may be known only within [ts, ts_hi].
    return [
        _pairs(candidates, root, cascade, rule.scope, timedelta(seconds=parse_duration(rule.window)),
               timedelta(seconds=parse_duration(rule.before)), skew)
        for rule, (root, cascade) in zip(rules, sides, strict=True)
    ]


def relink_orphaned_cascades(
    events: pl.DataFrame, rules: list[SuppressRule], skew: timedelta, inferred: Sequence[str] = (),
) -> pl.DataFrame:
    """A cascade whose root is no root candidate once every rule has run follows the
    ``suppress`` rules again, to the roots still standing that a line reported: suppress
    links a cascade to the earliest root in its window, and a later rule may find that one
    no root of the attempt (a flap that had recovered long before, the previous job's fault
    in the ``lookback``), which would leave the attempt's real root uncorroborated by the
    cascades it caused. A root a python rule inferred (``inferred``: their rule ids) takes
    only the cascades that rule linked itself. A cascade no standing root explains keeps
    its link (only its role is read)."""
    if events.is_empty() or not rules:
        return events
    # Narrow frames: the wide rows are never gathered for this check.
    narrow = events.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), "attempt_id", "event_id", "role",
                           "caused_by")
    roots = narrow.filter(pl.col("role") == "root_candidate").select("attempt_id", pl.col("event_id").alias("_at"))
    orphans = (
        narrow.filter((pl.col("role") == "cascade") & pl.col("caused_by").is_not_null())
        .select("_row", "attempt_id", pl.col("caused_by").alias("_at"))
        .join(roots, on=["attempt_id", "_at"], how="anti")
    )
    if orphans.is_empty():
        return events
    # Only the attempts with orphans are paired again (few: most roots stand).
    concerned = _with_rows(events).filter(
        pl.col("attempt_id").is_in(orphans["attempt_id"].unique().implode()) & ~pl.col("rule_id").is_in(list(inferred))
    )
    link = _earliest_links(pl.concat(_suppress_pairs(concerned, rules, skew)).join(orphans.select("_row"), on="_row",
                                                                                     how="semi"))
    if link.is_empty():
        return events
    return events.with_columns(events["caused_by"].scatter(link["_row"], link["_link"]))


def apply_precedence(events: pl.DataFrame, rules: list[PrecedenceRule], skew: timedelta) -> pl.DataFrame:
    """Where a ``prefer`` event and an ``over`` root candidate meet in one scope within the
    window (either order), the ``over`` event becomes a ``confirmation`` of the preferred
    (preferred events stamped after the attempt ended beyond ``skew`` excepted, see
    :func:`_pairs`)."""
    if events.is_empty() or not rules:
        return events
    events = _with_rows(events)
    sides = [(rule.prefer, _as_roots(rule.over)) for rule in rules]
    candidates = _pair_candidates(events, sides)
    pairs = []
    for rule, (prefer, over) in zip(rules, sides, strict=True):
        window = timedelta(seconds=parse_duration(rule.window))
        ahead = window if rule.ahead is None else timedelta(seconds=parse_duration(rule.ahead))
        pairs.append(_pairs(candidates, prefer, over, rule.scope, window, ahead, skew, rule.spans))
    return _relabel(events, pairs, "confirmation", only_roots=True)


PORT_DOWN_CAUSES = ("network.link_down", "network.link_flap")
"""Causes of a port that went down (:func:`demote_outlived_roots`)."""


FELT_WITHIN = timedelta(minutes=2)
"""An attempt that started failing this soon after an outage ended felt it: a flap under
traffic exhausts NCCL's IB retries within seconds, and the ranks abort before anyone logs
a NET/IB error (a launcher that shows only local rank 0)."""


OUTAGE_LEAD = timedelta(minutes=2)
"""How long before an outage was declared its node's own reports of it may come: a Lustre
client logs its requests to a target timing out (``ptlrpc_expire_one_request``) and then
declares the connection lost."""


def demote_recovered_outages(events: pl.DataFrame, skew: timedelta) -> pl.DataFrame:
    """A port that went down and came back up, a Lustre connection lost and restored, or an
    NFS server that stopped answering and came back (``nfs: server … OK``), more than
    :data:`FELT_WITHIN` before the attempt started failing is not its root cause: such
    root candidates become ``context`` — unless errors the application reported were
    tied to it, or to another outage of its node, as their confirmations (NCCL's
    ``NET/IB`` retry errors: the flap did break the job's traffic, though the watchdog
    noticed only later).

    So is such an outage when another root candidate of the attempt (not the scheduler's end
    of the job, :data:`engine.decide.LATE_ENDS`) may have been printed more than
    :data:`FELT_WITHIN` after it ended (its ``ts_hi``: a CUDA out-of-memory error
    in a job output without a single stamp may lie anywhere up to the attempt's end): that
    root explains the failure, and nothing the job printed ties the failure to the flap.

    "Started failing" is the first cascade of the attempt (:func:`failing_since`: printed
    once it had started), or its end when it has none; the outage's node's own log lines
    while it lasted (the Lustre client's RPC timeouts before its target came back) are the
    outage, not the attempt failing, and do not count, nor do those of the
    :data:`OUTAGE_LEAD` before it was declared (the RPC timeouts that made the client
    declare it). A
    cascade that reports a timeout (``timeout_ms`` in its params: the NCCL watchdog's
    ``Timeout(ms)``) started failing that long before it was printed: a collective that hung
    while the port flapped is noticed only when the timeout runs out. The recovery must be
    on the same node and port (a link-up of cause ``network.link_up``: the kernel's, or
    NCCL's ``port active``; a Lustre ``Connection restored``; the same NFS server's ``OK``); an outage that names no port
    (NCCL's ``Got async event : port error`` of older releases, a transmit timeout of a
    netdev) is closed by a link-up of any port of its node.
    """
    if events.is_empty():
        return events
    is_down = outage(down=True).is_not_null() & (pl.col("role") == "root_candidate")
    if not events.select(is_down.any()).item():
        return events
    events = _with_rows(events)
    downs = events.filter(is_down).with_columns(outage(down=True))
    ups = recoveries(events)
    # The node's own reports while its outage lasted (a Lustre client's RPC timeouts while
    # its target was gone), and in the OUTAGE_LEAD before it was declared (the timeouts that
    # made the client declare the connection lost), are the outage, not the attempt failing.
    spans = downs.select("attempt_id", "node", "_outage", pl.col("ts").alias("_down")).join(
        ups.select("attempt_id", "node", "_outage", "_up"), on=["attempt_id", "node", "_outage"], nulls_equal=True)
    echoes = (
        events.filter((pl.col("role") == "cascade") & pl.col("source").is_in(NODE_LOG_SOURCES))
        .select("_row", "attempt_id", "node", "ts")
        .join(spans, on=["attempt_id", "node"])
        .filter(pl.col("ts").is_between(pl.col("_down") - OUTAGE_LEAD, pl.col("_up")))["_row"]
    )
    # Only attempts with an outage need to know when they started failing, and their rivals.
    outaged = events.join(downs.select("attempt_id").unique(), on="attempt_id", how="semi")
    failing = failing_since(outaged.filter(~pl.col("_row").is_in(echoes.implode())), skew=skew)
    # Another root candidate that may have been printed well after the link came back (an
    # unstamped CUDA error in an output with no stamp at all lies anywhere up to the
    # attempt's end) explains the failure as well, and nothing ties the failure to the flap.
    # An error printed only after the link had been back for FELT_WITHIN cannot be the
    # flap's doing (NCCL gives up on an unanswered send within seconds): precedence links
    # it to the attempt's earliest outage within its window, which may be another node's
    # flap that recovered long before.
    felt = (pl.col("_confirmed") <= pl.col("_up") + FELT_WITHIN).fill_null(False)
    recovered = (
        closed(downs, ups)
        .join(failing, on="attempt_id")
        .join(outage_rivals(outaged), on="attempt_id", how="left")
        .filter((pl.col("_up") + FELT_WITHIN < pl.col("_failing"))
                | (pl.col("_up") + FELT_WITHIN < pl.col("_rival")).fill_null(False))
        .join(confirmed(events, downs), on=["attempt_id", "node"], how="left", nulls_equal=True)
        .filter(~felt)
        ["_row"]
    )
    return with_role(events, events["_row"].is_in(recovered.implode()), "context").drop("_row")


HANG_MARGIN = timedelta(minutes=1)
"""How long after the hung collective began a fault may still have hung it: the collective
was already running (a large all-reduce takes seconds) when the fault struck."""


GPU_DOMAINS = ("gpu", "gpu_memory", "nvlink")
"""The domains of a GPU's own faults (:func:`demote_roots_after_the_hang`)."""

OOM_KILL_CAUSE = "host.oom_killer"
"""The kernel's OOM kill (``host.yaml``): on the node the others waited for, late or not,
the kill of the rank that stalled in reclaim (:func:`demote_roots_after_the_hang`)."""

NOTICED_LATE = ("host.node_failure", "storage.filesystem_unavailable")
"""Causes whose reports are stamped when a timeout ran out, not when the fault began
(:func:`demote_roots_after_the_hang`): Slurm reports a node that fell silent only after
``SlurmdTimeout`` (300 s by default), often after the peers' NCCL watchdogs fired; a
Lustre client reports its lost target after an RPC timeout (100 s and more), an NFS client
its server after the major timeout (about 180 s with the default ``timeo`` and
``retrans``), while the rank writing the checkpoint has been stuck all along."""


def demote_roots_after_the_hang(events: pl.DataFrame) -> pl.DataFrame:
    """An infrastructure root candidate stamped more than :data:`HANG_MARGIN` after the
    collective that timed out began (the latest moment a watchdog cascade can have been
    printed, its ``ts_hi``, minus its ``Timeout(ms)``: an unstamped one inherited an earlier
    stamp) cannot have hung it: the job was already stuck (rank 0 still tokenising, a deadlock),
    and a link that flapped thirteen minutes into the wait is ``context``. The stuck rank is
    then named by the python rules (``straggler.py``). A workload root printed late stays:
    it may report the stall itself (``DataLoader timed out after 300 seconds``). A report of
    how long the fault had lasted when it was printed (a CPU "stuck for 74s") dates it by
    its onset (:func:`engine.decide.onset`); one the precedence rules made the end of a story
    its node began earlier (a disk disabled after its own command timeouts, their
    ``confirmation``) by the earliest of those reports of its domain. So is a scheduler's
    end of the job stamped that late
    (:data:`engine.decide.LATE_ENDS`: ``scancel``'s banner, the time limit's, a preemption's): someone,
    the clock or the scheduler stopped a job that was already stuck (ranks that keep waiting
    once their watchdog fired, with ``TORCH_NCCL_ASYNC_ERROR_HANDLING=0``, until the limit
    ends them); nor is the scheduler's record of any of them the fallback root
    (:func:`engine.decide.hung_before_the_end`).

    A GPU's fault on a node where a rank reported no timeout (fewer of its ranks than of
    another node's, or none) stays: that rank is the one the others waited for, and its
    GPU failing is why, whatever the node's clock says (one running minutes ahead, with no
    launch line to place it, stamps the fault after the hang began); so does the OOM
    killer's kill on such a node (its ranks stalled in reclaim before the kernel picked a
    process to kill, a minute or more into the wait); its verdict is never
    ``definitive`` (:data:`~engine.rules.python_rules.UNDECIDED_PARAM`): the stamp does not
    say it came first. Nor does a report made
    when a timeout ran out (:data:`NOTICED_LATE`: a node the scheduler lost, a filesystem
    that stopped answering): it dates the notice, and the fault began before it."""
    if events.is_empty():
        return events
    # Narrow frames: only a few rows report a timeout, and only root candidates can move.
    timeouts = (
        events.select("attempt_id", "node", "rank", "ranks", "role", "params", "ts_hi")
        .filter(reports_timeout())
        .filter(_timeout_ms().is_not_null())
    )
    hung = timeouts.group_by("attempt_id").agg(_cascade_began("ts_hi").min().alias("_hung"))
    if hung.is_empty():
        return events
    reporting = (
        timeouts.drop_nulls("node")
        .select("attempt_id", "node", pl.coalesce(pl.col("ranks"), pl.concat_list("rank")).alias("_r"))
        .explode("_r").group_by("attempt_id", "node").agg(pl.col("_r").n_unique().alias("_reported"))
    )
    most = reporting.group_by("attempt_id").agg(pl.col("_reported").max().alias("_most"))
    candidate = (pl.col("role") == "root_candidate") & (
        (pl.col("domain").is_in(INFRASTRUCTURE) & ~pl.col("cause").is_in(NOTICED_LATE))
        | pl.col("cause").is_in(LATE_ENDS)
    )
    waited_for = (pl.col("domain").is_in(GPU_DOMAINS) | (pl.col("cause") == OOM_KILL_CAUSE)) \
        & (pl.col("_reported").fill_null(0) < pl.col("_most"))
    # A root the precedence rules made the end of a story its node began earlier (a disk
    # disabled after its own timeouts) began with the earliest of those reports of its domain.
    began = story_began(events.lazy(), onset()).collect()
    marks = (
        events.select("attempt_id", "node", "domain", "cause", "event_id", onset().alias("_onset"), candidate=candidate)
        .join(began, on=STORY_KEY, how="left", maintain_order="left")
        .with_columns(pl.min_horizontal("_onset", "_began").alias("_onset"))
        .join(hung, on="attempt_id", how="left", maintain_order="left")
        .join(reporting, on=["attempt_id", "node"], how="left", maintain_order="left")
        .join(most, on="attempt_id", how="left", maintain_order="left")
        .select(
            after=pl.col("candidate") & (pl.col("_onset") > pl.col("_hung") + HANG_MARGIN).fill_null(False),
            waited_for=waited_for.fill_null(False),
        )
    )
    late = marks["after"] & ~marks["waited_for"]
    # Kept only because its node's rank never reported: its stamp does not say it came
    # first, so the verdict it makes is never definitive.
    kept = marks["after"] & marks["waited_for"]
    events = with_role(events, late, "context")
    return with_param(events, kept, UNDECIDED_PARAM, "stamped after the hang began, on the node the others waited for") \
        if kept.any() else events


def _timeout_ms() -> pl.Expr:
    """A cascade's reported timeout (``timeout_ms`` in its params, the NCCL watchdog's
    ``Timeout(ms)``); null for other rows (only cascades' params are parsed)."""
    cascade = pl.col("role") == "cascade"
    # A regex reads the one key several times faster than a JSON path; params are JSON
    # objects whose values are strings (extracted groups) or numbers.
    return pl.when(cascade).then(pl.col("params")).str.extract(TIMEOUT_MS, 1).cast(pl.Int64, strict=False)


TIMEOUT_MS = r'"timeout_ms": ?"?(-?[0-9]+)'
"""The ``timeout_ms`` value of a params JSON object, as group 1."""


def _cascade_began(printed: str = "ts") -> pl.Expr:
    """When a cascade's failure began: a cascade that reports a timeout (``timeout_ms`` in
    its params, the NCCL watchdog's ``Timeout(ms)``) began that long before it was printed.
    ``printed`` is ``ts`` (the earliest moment the line can have been printed) or ``ts_hi``
    (the latest: an unstamped line lies anywhere up to the next stamped one)."""
    return pl.col(printed) - pl.duration(milliseconds=_timeout_ms().fill_null(0))


def failing_since(
    events: pl.DataFrame, *roots: pl.Expr, skew: timedelta = timedelta(0), roots_printed: str = "ts",
) -> pl.DataFrame:
    """``attempt_id`` and ``_failing``: when each attempt of ``events`` started failing — its
    first cascade (:func:`_cascade_began`), the first of the events ``roots`` selects, or
    its end, whichever is first. ``roots_printed`` is when a root counts: ``ts`` (the
    earliest it may have been printed: an unstamped line at the stamp it inherited) or
    ``ts_hi`` (the latest: anywhere up to the next stamped line).

    A cascade printed before the attempt started (by more than ``skew``) is not its own: an
    attempt cannot fail before it runs, and a node's lines from its ``lookback`` window hold
    the teardown of the job before it there (XID 45 as that job's processes were killed)."""
    cascade = (pl.col("role") == "cascade") & (pl.col("ts_hi") >= pl.col("start_ts") - skew).fill_null(True)
    firsts = [_cascade_began().filter(cascade).min(), *(pl.col(roots_printed).filter(r).min() for r in roots)]
    return events.group_by("attempt_id").agg(pl.min_horizontal(*firsts, pl.col("end_ts").first()).alias("_failing"))


def demote_outlived_roots(
    events: pl.DataFrame, fail_at_once: timedelta, skew: timedelta, passing: pl.DataFrame
) -> pl.DataFrame:
    """Root candidates the attempt outlived become ``context``.

    One stamped before its attempt started (the ``lookback`` window), and not repeated after
    the start (a flood's ``last_ts``: an image pull refused again and again while the
    attempt waited for its pods), is the root only of an attempt that started failing
    within ``fail_at_once`` of its start: a GPU that fell off the bus before the job landed
    fails it at once. An attempt that ran longer than that had
    working hardware after the event (a link that came back), so for it the event is
    ``context``. So is a fault that passes by itself (``passing``: the ``rule_id`` and
    ``event`` of such outcomes, :meth:`engine.rules.loader.RulePack.passing`), or a port
    that went down (:data:`PORT_DOWN_CAUSES`) that no error of the job confirms (one that
    came back up is :func:`demote_recovered_outages`'s), during the
    attempt that started failing more than ``fail_at_once`` after it, when another root
    candidate stands there (a NIC's transmit queue reset three hours before a CUDA
    out-of-memory error; for such a port, one of another domain that may have been printed
    that late, its ``ts_hi``: an unstamped traceback lies anywhere up to the next stamp);
    with no other root, nothing else explains the failure, and the fault stays.

    "Started failing" is the attempt's first cascade, its first root candidate stamped after
    its start that does not pass by itself, or its end (:func:`failing_since`).
    """
    if events.is_empty():
        return events
    events = events.join(passing.select("rule_id", "event", pl.lit(True).alias("_passes")),
                         on=["rule_id", "event"], how="left", maintain_order="left")
    # A port that went down, and no error of the job confirms, is outlived as a fault that
    # passes is: an attempt that worked on for long after it did not send its traffic
    # through it (a one-node job's collectives over NVLink, a storage HCA).
    port_down = pl.col("cause").is_in(PORT_DOWN_CAUSES)
    if events.select(port_down.any()).item():
        felt = (
            events.filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
            .select("attempt_id", pl.col("caused_by").alias("event_id")).unique()
            .with_columns(pl.lit(True).alias("_felt"))
        )
        events = events.join(felt, on=["attempt_id", "event_id"], how="left", maintain_order="left").with_columns(
            (pl.col("_passes").fill_null(False) | (port_down & pl.col("_felt").is_null())).alias("_passes")
        ).drop("_felt")
    passes = pl.col("_passes").fill_null(False)
    root = pl.col("role") == "root_candidate"
    # A flood that went on into the attempt (its last repeat stamped after the start) did
    # not end before it: the fault was still there when the attempt ran.
    repeated_until = pl.coalesce("last_ts", "ts")
    early = root & (pl.col("ts_hi") < pl.col("start_ts") - skew) & (repeated_until < pl.col("start_ts") - skew)
    recovering = root & ~early & passes
    if not events.select((early | recovering).any()).item():
        return events.drop("_passes")
    events = _with_rows(events)
    # The attempt's other roots: stamped after it started, of faults that do not pass.
    standing = root & (pl.col("ts_hi") >= pl.col("start_ts") - skew) & ~passes
    suspects = events.filter(early | recovering)["attempt_id"].unique()
    concerned = events.filter(pl.col("attempt_id").is_in(suspects.implode()))
    failing = failing_since(concerned, standing, skew=skew)
    after = concerned.filter(standing).group_by("attempt_id").agg(pl.col("ts").max().alias("_last_root"))
    # A port down that no error confirms was also outlived when the attempt's first
    # cascade came long after it and a root of another domain may have been printed that
    # late: an unstamped CUDA out-of-memory traceback in an output whose progress lines
    # carry no stamp lies anywhere up to the next stamp (a port down 7 minutes into a
    # one-node job that failed 49 minutes later). A network error of the job, however
    # unstamped, is the port's own symptom, not a rival.
    rival = standing & ~pl.col("cause").str.starts_with("network.").fill_null(False)
    failing_late = failing_since(concerned, rival, skew=skew, roots_printed="ts_hi").rename({"_failing": "_failing_late"})
    after_late = concerned.filter(rival).group_by("attempt_id").agg(pl.col("ts_hi").max().alias("_last_rival"))
    outlived_start = early & (pl.col("_failing") > pl.col("start_ts") + fail_at_once)
    since = pl.col("ts_hi") + fail_at_once
    outlived_fault = recovering & (
        ((pl.col("_failing") > since) & (pl.col("_last_root") > since))
        | (port_down & (pl.col("_failing_late") > since) & (pl.col("_last_rival") > since))
    )
    outlived = (
        concerned.join(failing, on="attempt_id", how="left").join(after, on="attempt_id", how="left")
        .join(failing_late, on="attempt_id", how="left").join(after_late, on="attempt_id", how="left")
        .filter((outlived_start | outlived_fault).fill_null(False))["_row"]
    )
    return with_role(events, events["_row"].is_in(outlived.implode()), "context").drop("_row", "_passes")


CHAIN_HOPS = 3
"""How many confirmations deep :func:`restore_orphaned_confirmations` follows a chain to its
root (precedence rules chain at most a few events: CUDA error → XID 13 → XID 94)."""


def restore_orphaned_confirmations(events: pl.DataFrame) -> pl.DataFrame:
    """A confirmation whose preferred event is no root candidate once every rule has run
    confirms nothing: it is a root candidate again.

    Precedence makes a root candidate the ``confirmation`` of another (``caused_by``); a
    python rule may later find that other event no root of this attempt (an NVLink5 XID its
    severity marks ``Nonfatal``, an XID the previous job left on the node). The application's
    report of the fault (``CUDA error: uncorrectable ECC error``) would then leave the
    attempt without a root at all. One stamped before the attempt started is another
    report of that earlier fault: ``context``, as the event it confirmed is.
    """
    linked = _with_rows(events).filter((pl.col("role") == "confirmation") & pl.col("caused_by").is_not_null())
    if linked.is_empty():
        return events
    roots = events.filter(pl.col("role") == "root_candidate").select("attempt_id", pl.col("event_id").alias("_at"))
    orphans = linked.join(roots, left_on=["attempt_id", "caused_by"], right_on=["attempt_id", "_at"], how="anti")
    if orphans.is_empty():
        return events
    # A preferred event that became the confirmation of another root hands its own
    # confirmations on to that root: the CUDA error XID 13 confirmed, once the XID 94 beside
    # it on the GPU outranks the XID 13, confirms the XID 94.
    hops = linked.select("attempt_id", pl.col("event_id").alias("_at"), pl.col("caused_by").alias("_next")).unique(
        ["attempt_id", "_at"], keep="first", maintain_order=True)
    target = orphans.select("_row", "attempt_id", pl.col("caused_by").alias("_at"))
    for _ in range(CHAIN_HOPS):
        target = target.join(hops, on=["attempt_id", "_at"], how="left", maintain_order="left").select(
            "_row", "attempt_id", pl.coalesce("_next", "_at").alias("_at"))
    handed = target.join(roots, on=["attempt_id", "_at"], how="semi")
    lost = orphans.join(handed, on="_row", how="anti")
    # Another report of a fault from before the attempt started (the device plugin's word
    # of the XID the previous job left) is that fault's, as the XID is: context.
    before = lost.filter((pl.col("ts_hi") < pl.col("start_ts")).fill_null(False))["_row"]
    role = events["role"].scatter(lost["_row"], "root_candidate").scatter(before, "context")
    caused_by = events["caused_by"].scatter(lost["_row"], None).scatter(handed["_row"], handed["_at"])
    return events.with_columns(role, caused_by)
