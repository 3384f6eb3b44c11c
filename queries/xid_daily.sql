-- purpose: NVIDIA XID errors per UTC day by code, node and GPU
-- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
-- param until: DATE = NULL -- last UTC day included (NULL: no upper bound)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- column day: UTC day of the event (events partition)
-- column cluster: cluster of the node
-- column node: node whose kernel reported the XID
-- column gpu: the GPU's PCI bus id as printed in the XID line (NULL when the line names none)
-- column xid: XID code
-- column event: event name the rule pack gives that code (e.g. xid_79_fallen_off_bus)
-- column events: extracted events (a flood of repeats within the dedupe window is one event)
-- column occurrences: lines reported, flood repeats included (sum of the events' count)
-- column attempts: attempts the XID struck: running on the node when it was reported, or
--   tied to the event (an application-side report)
--
-- An XID event is any extracted event whose params carry an `xid` value: the kernel-log
-- XID rule and metric-derived XID events alike, whatever the rule id. The kernel's lines
-- belong to no attempt: an attempt counts when the node was one of its nodes between its
-- start and its end (still running: no end).
WITH xids AS (
    SELECT
        day, cluster, node, gpu, ts, count, event, attempt_id, event_id,
        CAST(json_extract_string(params, '$.xid') AS INTEGER) AS xid
    FROM events
    WHERE json_extract_string(params, '$.xid') IS NOT NULL
      AND ($since IS NULL OR day >= $since)
      AND ($until IS NULL OR day <= $until)
      AND ($cluster IS NULL OR cluster = $cluster)
),
placed AS (
    SELECT cluster, unnest(nodes) AS node, attempt_id, start_ts, end_ts
    FROM attempts
    WHERE start_ts IS NOT NULL
      AND ($cluster IS NULL OR cluster = $cluster)
),
struck AS (
    SELECT x.day, x.cluster, x.node, x.gpu, x.xid, p.attempt_id
    FROM xids AS x
    JOIN placed AS p
      ON p.cluster = x.cluster AND p.node = x.node
     AND x.ts >= p.start_ts AND (p.end_ts IS NULL OR x.ts <= p.end_ts)
    UNION
    SELECT day, cluster, node, gpu, xid, attempt_id FROM xids WHERE attempt_id IS NOT NULL
),
per_gpu AS (
    SELECT
        day, cluster, node, gpu, xid,
        min(event) AS event,
        count(*) AS events,
        CAST(sum(count) AS BIGINT) AS occurrences
    FROM xids
    GROUP BY ALL
)
SELECT
    g.day, g.cluster, g.node, g.gpu, g.xid, g.event, g.events, g.occurrences,
    count(DISTINCT s.attempt_id) AS attempts
FROM per_gpu AS g
LEFT JOIN struck AS s
  ON s.day = g.day AND s.cluster = g.cluster AND s.node = g.node AND s.xid = g.xid
 AND s.gpu IS NOT DISTINCT FROM g.gpu
GROUP BY ALL
ORDER BY g.day, g.cluster, g.node, g.gpu NULLS LAST, g.xid
