-- purpose: failed attempts and lost GPU-hours by domain and cause, per day or per week
-- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
-- param until: DATE = NULL -- last UTC day included (NULL: no upper bound)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- param grain: VARCHAR = day -- 'day' or 'week' (weeks start on Monday)
-- column period: first UTC day of the day or week (attempts count on the day they ended)
-- column cluster: cluster
-- column domain: verdict domain
-- column cause: verdict cause code
-- column failures: attempts that did not complete (state neither completed nor running)
-- column lost_node_hours: sum of (end_ts - start_ts) x n_nodes over those attempts
-- column lost_gpu_hours: sum of (end_ts - start_ts) x n_nodes x gpus_per_node
-- column gpu_hours_after_fault: sum of fault_to_end_s x n_nodes x gpus_per_node
-- column unknown_gpu_count: failed attempts whose gpus_per_node is unknown
--
-- Definitions. Lost GPU-hours count the whole attempt: without checkpoint records every
-- GPU-hour of a failed attempt is taken as lost. gpu_hours_after_fault is the part burnt
-- after the first fault (hung collectives, watchdog waits): the time a faster detector would
-- have saved. Attempts whose gpus_per_node is unknown add node-hours but no GPU-hours
-- (counted in unknown_gpu_count).
WITH failed AS (
    SELECT
        r.cluster,
        r.day,
        r.domain,
        r.cause,
        epoch(r.end_ts - r.start_ts) / 3600.0 AS hours,
        coalesce(a.n_nodes, len(a.nodes), 0) AS n_nodes,
        a.gpus_per_node,
        r.fault_to_end_s
    FROM results AS r
    LEFT JOIN attempts AS a USING (cluster, attempt_id)
    WHERE r.state NOT IN ('completed', 'running')
      AND ($since IS NULL OR r.day >= $since)
      AND ($until IS NULL OR r.day <= $until)
      AND ($cluster IS NULL OR r.cluster = $cluster)
)
SELECT
    CASE lower($grain)
        WHEN 'day' THEN day
        WHEN 'week' THEN CAST(date_trunc('week', day) AS DATE)
        ELSE error('grain must be day or week, not ' || $grain)
    END AS period,
    cluster,
    domain,
    cause,
    count(*) AS failures,
    sum(hours * n_nodes) AS lost_node_hours,
    coalesce(sum(hours * n_nodes * gpus_per_node), 0.0) AS lost_gpu_hours,
    coalesce(sum(coalesce(fault_to_end_s, 0) / 3600.0 * n_nodes * gpus_per_node), 0.0)
        AS gpu_hours_after_fault,
    count(*) FILTER (WHERE gpus_per_node IS NULL) AS unknown_gpu_count
FROM failed
GROUP BY ALL
ORDER BY period, cluster, lost_gpu_hours DESC, domain, cause
