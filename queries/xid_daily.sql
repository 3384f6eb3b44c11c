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
-- column attempts: attempts the events were tied to (application-side events only)
--
-- An XID event is any extracted event whose params carry an `xid` value: the kernel-log
-- XID rule and metric-derived XID events alike, whatever the rule id.
SELECT
    day,
    cluster,
    node,
    gpu,
    CAST(json_extract_string(params, '$.xid') AS INTEGER) AS xid,
    min(event) AS event,
    count(*) AS events,
    CAST(sum(count) AS BIGINT) AS occurrences,
    count(DISTINCT attempt_id) AS attempts
FROM events
WHERE json_extract_string(params, '$.xid') IS NOT NULL
  AND ($since IS NULL OR day >= $since)
  AND ($until IS NULL OR day <= $until)
  AND ($cluster IS NULL OR cluster = $cluster)
GROUP BY ALL
ORDER BY day, cluster, node, gpu NULLS LAST, xid
