-- purpose: nodes and GPUs blamed for at least $k failed attempts within $days days
-- param k: INTEGER = 2 -- how many failed attempts make a repeat offender
-- param days: INTEGER = 7 -- window length in UTC days, ending on $until
-- param until: DATE = NULL -- last UTC day of the window (NULL: the last day with results)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- column kind: node or gpu
-- column cluster: cluster
-- column node: the culprit node (for a GPU: its node when the verdict names exactly one)
-- column gpu: the culprit GPU as the verdict names it (NULL for kind node)
-- column attempts: failed attempts that blamed it within the window
-- column causes: distinct verdict causes of those attempts
-- column attempt_ids: the attempts
-- column first_end_ts: end of the first of them
-- column last_end_ts: end of the last of them
-- column window_start: first UTC day of the window
-- column window_end: last UTC day of the window
--
-- Blamed means named in the verdict's culprit_nodes / culprit_gpus of an attempt whose state
-- is neither completed nor running; attempts count on the UTC day they ended. A verdict
-- whose evidence notes a systemic event (fleet.systemic: one cause on many nodes at once)
-- blames none: its nodes were the victims of a shared component.
WITH bounds AS (
    SELECT
        coalesce($until, (SELECT max(day) FROM results)) AS window_end
),
scope AS (
    SELECT window_end - ($days - 1) AS window_start, window_end FROM bounds
),
failed AS (
    SELECT r.cluster, r.attempt_id, r.cause, r.end_ts, r.culprit_nodes, r.culprit_gpus,
           w.window_start, w.window_end
    FROM results AS r, scope AS w
    WHERE r.state NOT IN ('completed', 'running')
      AND r.day BETWEEN w.window_start AND w.window_end
      AND ($cluster IS NULL OR r.cluster = $cluster)
      AND NOT list_contains(list_transform(r.evidence, lambda e: e.rule_id), 'fleet.systemic')
),
blame AS (
    SELECT 'node' AS kind, cluster, unnest(culprit_nodes) AS node, CAST(NULL AS VARCHAR) AS gpu,
           attempt_id, cause, end_ts, window_start, window_end
    FROM failed
    UNION ALL
    SELECT 'gpu' AS kind, cluster,
           CASE WHEN len(culprit_nodes) = 1 THEN culprit_nodes[1] END AS node,
           unnest(culprit_gpus) AS gpu,
           attempt_id, cause, end_ts, window_start, window_end
    FROM failed
)
SELECT
    kind, cluster, node, gpu,
    count(DISTINCT attempt_id) AS attempts,
    list(DISTINCT cause ORDER BY cause) AS causes,
    list(DISTINCT attempt_id ORDER BY attempt_id) AS attempt_ids,
    min(end_ts) AS first_end_ts,
    max(end_ts) AS last_end_ts,
    window_start,
    window_end
FROM blame
GROUP BY kind, cluster, node, gpu, window_start, window_end
HAVING count(DISTINCT attempt_id) >= $k
ORDER BY attempts DESC, kind DESC, cluster, node NULLS LAST, gpu NULLS FIRST
