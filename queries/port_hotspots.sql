-- purpose: fabric ports (and their switch ports) ranked by link-downs, flaps and errors
-- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
-- param until: DATE = NULL -- last UTC day included (NULL: no upper bound)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- param limit: INTEGER = 50 -- how many ports to list
-- column cluster: cluster
-- column node: host the port belongs to
-- column port: port as the log names it (mlx5_1, mlx5_7:1, enp60s0np0…); a bare HCA name
--   that another line of the node spells with its port number (mlx5_2 beside mlx5_2:1) is
--   counted under the longer name
-- column pci: PCI address of the HCA when the line gives it (an HCA and its netdev share it)
-- column switch: switch the port is cabled to (from topology; NULL without topology)
-- column switch_port: switch port it is cabled to (from topology)
-- column link_downs: link-down reports (event cause network.link_down, flood repeats included)
-- column flaps: link-downs that came back up later in the window, plus port-error events (network.link_flap)
-- column errors: other network faults on the port (completion errors, async events, error counters…)
-- column first_ts: first fault on the port
-- column last_ts: last fault on the port
-- column failed_attempts: failed attempts that ran on the node while the port reported a fault
-- column blamed_attempts: failed attempts whose verdict names this port and node as culprit
--
-- A fault is a link-down, a flap or an error; link-up and link-training reports are not
-- faults. A failed attempt is one whose state is neither completed nor running. A topology
-- row matches a port named <hca>, <hca>:<port> or <hca>/<port> on the same node (a bare
-- <hca> uses the line's port number, 1 when it names none).
WITH named AS (
    SELECT
        cluster, node, port, ts, count, cause,
        json_extract_string(params, '$.pci') AS pci,
        coalesce(json_extract_string(params, '$.hca_port'), '1') AS hca_port
    FROM events
    WHERE port IS NOT NULL
      AND domain = 'network'
      AND ($since IS NULL OR day >= $since)
      AND ($until IS NULL OR day <= $until)
      AND ($cluster IS NULL OR cluster = $cluster)
),
-- Names that carry a port number, by the HCA and number they spell (mlx5_2:1 → mlx5_2, 1).
spelled AS (
    SELECT
        cluster, node,
        regexp_extract(port, '^(.+)[:/]([0-9]+)$', 1) AS hca,
        regexp_extract(port, '^(.+)[:/]([0-9]+)$', 2) AS hca_port,
        min(port) AS port
    FROM named
    WHERE regexp_matches(port, '^.+[:/][0-9]+$')
    GROUP BY ALL
),
-- One port, one row: a bare name folds into the spelled name of the same HCA and number.
port_events AS (
    SELECT n.* REPLACE (coalesce(s.port, n.port) AS port), n.port AS named_port
    FROM named AS n
    LEFT JOIN spelled AS s
      ON s.cluster = n.cluster AND s.node = n.node AND s.hca = n.port AND s.hca_port = n.hca_port
),
classified AS (
    SELECT
        *,
        max(ts) FILTER (WHERE cause = 'network.link_up')
            OVER (PARTITION BY cluster, node, port) AS last_up,
        CASE
            WHEN cause = 'network.link_down' THEN 'down'
            WHEN cause = 'network.link_flap' THEN 'flap'
            WHEN cause IN ('network.link_up', 'network.link_training', 'network.link_state_change')
                THEN 'state'
            ELSE 'error'
        END AS kind
    FROM port_events
),
faults AS (
    SELECT * FROM classified WHERE kind <> 'state'
),
per_port AS (
    SELECT
        cluster, node, port,
        min(pci) AS pci,
        min(hca_port) AS hca_port,
        list(DISTINCT named_port) AS names,
        CAST(coalesce(sum(count) FILTER (WHERE kind = 'down'), 0) AS BIGINT) AS link_downs,
        CAST(coalesce(sum(count) FILTER (WHERE kind = 'down' AND last_up >= ts), 0)
            + coalesce(sum(count) FILTER (WHERE kind = 'flap'), 0) AS BIGINT) AS flaps,
        CAST(coalesce(sum(count) FILTER (WHERE kind = 'error'), 0) AS BIGINT) AS errors,
        min(ts) AS first_ts,
        max(ts) AS last_ts
    FROM faults
    GROUP BY cluster, node, port
),
failed AS (
    SELECT r.cluster, r.attempt_id, r.culprit_nodes, r.culprit_ports, a.nodes, a.start_ts, a.end_ts
    FROM results AS r
    JOIN attempts AS a USING (cluster, attempt_id)
    WHERE r.state NOT IN ('completed', 'running')
),
exposed AS (
    SELECT f.cluster, f.node, f.port, count(DISTINCT a.attempt_id) AS failed_attempts
    FROM faults AS f
    JOIN failed AS a
      ON a.cluster = f.cluster
     AND list_contains(a.nodes, f.node)
     AND f.ts BETWEEN a.start_ts AND a.end_ts
    GROUP BY ALL
),
blamed AS (
    SELECT p.cluster, p.node, p.port, count(DISTINCT a.attempt_id) AS blamed_attempts
    FROM per_port AS p
    JOIN failed AS a
      ON a.cluster = p.cluster
     AND list_has_any(a.culprit_ports, p.names)
     AND list_contains(a.culprit_nodes, p.node)
    GROUP BY ALL
),
cabling AS (
    SELECT cluster, node, hca, port AS hca_port, switch, switch_port
    FROM topology
    WHERE kind = 'hca_port'
)
SELECT
    p.cluster, p.node, p.port, p.pci,
    t.switch, t.switch_port,
    p.link_downs, p.flaps, p.errors, p.first_ts, p.last_ts,
    coalesce(e.failed_attempts, 0) AS failed_attempts,
    coalesce(b.blamed_attempts, 0) AS blamed_attempts
FROM per_port AS p
LEFT JOIN exposed AS e USING (cluster, node, port)
LEFT JOIN blamed AS b USING (cluster, node, port)
LEFT JOIN cabling AS t
  ON t.cluster = p.cluster
 AND t.node = p.node
 AND (p.port IN (t.hca || ':' || t.hca_port, t.hca || '/' || t.hca_port)
      OR (p.port = t.hca AND p.hca_port = t.hca_port))
ORDER BY p.link_downs + p.flaps + p.errors DESC, failed_attempts DESC, p.cluster, p.node, p.port
LIMIT $limit
