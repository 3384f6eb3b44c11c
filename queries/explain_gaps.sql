-- purpose: share of failed attempts per day whose verdict is ambiguous or insufficient
-- param since: DATE = NULL -- first UTC day included (NULL: no lower bound)
-- param until: DATE = NULL -- last UTC day included (NULL: no upper bound)
-- param cluster: VARCHAR = NULL -- only this cluster (NULL: every cluster)
-- column day: UTC day the attempts ended
-- column cluster: cluster
-- column failures: attempts that did not complete (state neither completed nor running)
-- column definitive: failures with a definitive verdict
-- column probable: failures with a probable verdict
-- column ambiguous: failures with competing root causes
-- column insufficient: failures with symptoms only or missing sources
-- column ambiguous_share: ambiguous / failures
-- column insufficient_share: insufficient / failures
-- column gap_share: (ambiguous + insufficient) / failures: what the engine could not explain
SELECT
    day,
    cluster,
    count(*) AS failures,
    count(*) FILTER (WHERE quality = 'definitive') AS definitive,
    count(*) FILTER (WHERE quality = 'probable') AS probable,
    count(*) FILTER (WHERE quality = 'ambiguous') AS ambiguous,
    count(*) FILTER (WHERE quality = 'insufficient') AS insufficient,
    count(*) FILTER (WHERE quality = 'ambiguous') / count(*) AS ambiguous_share,
    count(*) FILTER (WHERE quality = 'insufficient') / count(*) AS insufficient_share,
    count(*) FILTER (WHERE quality IN ('ambiguous', 'insufficient')) / count(*) AS gap_share
FROM results
WHERE state NOT IN ('completed', 'running')
  AND ($since IS NULL OR day >= $since)
  AND ($until IS NULL OR day <= $until)
  AND ($cluster IS NULL OR cluster = $cluster)
GROUP BY ALL
ORDER BY day, cluster
