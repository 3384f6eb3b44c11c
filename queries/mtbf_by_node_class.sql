-- purpose: mean time between infrastructure failures per node class (node-hours per failure)
-- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
-- param until: DATE = NULL -- last UTC day included (NULL: no upper bound)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- column cluster: cluster
-- column node_class: the node name without its trailing digits and separator (gpu013 -> gpu, dgx-a100-07 -> dgx-a100)
-- column nodes: distinct nodes of the class that ran attempts
-- column attempts: attempts that ran on nodes of the class
-- column node_hours: node-hours in service: sum over attempts and their nodes of end_ts - start_ts
-- column failures: failed attempts with an infrastructure verdict naming a node of the class as culprit
-- column mtbf_hours: node_hours / failures (NULL when there was no failure)
--
-- In service means running an attempt: idle time is not counted (the lake only knows what
-- attempts ran). Attempts count on the UTC day they ended.
WITH service AS (
    SELECT cluster, attempt_id, unnest(nodes) AS node,
           epoch(end_ts - start_ts) / 3600.0 AS hours
    FROM attempts
    WHERE start_ts IS NOT NULL AND end_ts IS NOT NULL
      AND ($since IS NULL OR day >= $since)
      AND ($until IS NULL OR day <= $until)
      AND ($cluster IS NULL OR cluster = $cluster)
),
classed AS (
    SELECT *, regexp_replace(node, '[-_]?[0-9]+$', '') AS node_class FROM service
),
per_class AS (
    SELECT cluster, node_class,
           count(DISTINCT node) AS nodes,
           count(DISTINCT attempt_id) AS attempts,
           sum(hours) AS node_hours
    FROM classed
    GROUP BY cluster, node_class
),
blamed AS (
    SELECT cluster, attempt_id, unnest(culprit_nodes) AS node
    FROM results
    WHERE responsibility = 'infrastructure'
      AND state NOT IN ('completed', 'running')
      AND ($since IS NULL OR day >= $since)
      AND ($until IS NULL OR day <= $until)
      AND ($cluster IS NULL OR cluster = $cluster)
),
failures AS (
    SELECT cluster, regexp_replace(node, '[-_]?[0-9]+$', '') AS node_class,
           count(DISTINCT attempt_id) AS failures
    FROM blamed
    GROUP BY ALL
)
SELECT
    p.cluster, p.node_class, p.nodes, p.attempts, p.node_hours,
    coalesce(f.failures, 0) AS failures,
    p.node_hours / nullif(f.failures, 0) AS mtbf_hours
FROM per_class AS p
LEFT JOIN failures AS f USING (cluster, node_class)
ORDER BY mtbf_hours NULLS LAST, p.cluster, p.node_class
