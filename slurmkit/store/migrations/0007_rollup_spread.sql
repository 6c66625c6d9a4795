-- slurmkit accounting store, version 7: the usage rollup's hours hold the time each job run spent in them
-- (slurmkit/store/rollup.py): a run's GPU-seconds and metric-seconds are spread over the UTC hours it ran in,
-- its counts (jobs, waits, GPUs idle, records per source) stay in the hour it started. A report period is then
-- the sum of its buckets, with no run-by-run correction of the runs crossing its edges. The version 6 rows are
-- dropped, every hour holding job runs is marked stale, and the next `sk admin ingest` (or
-- `sk admin rebuild-rollup`) recomputes all of them. Until then reports compute run by run.

DELETE FROM usage_rollup;
DELETE FROM usage_rollup_sources;
DELETE FROM rollup_buckets;

INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / 3600 * 3600, start_time / 3600 * 3600 + 3600, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / 3600;

-- The time zones whose local days the rollup also keeps (`sk admin rebuild-rollup --zone`): a report by day in
-- one of them reads one bucket per day instead of its 24 hours.
CREATE TABLE IF NOT EXISTS rollup_zones (
    zone        TEXT    PRIMARY KEY              -- an IANA name, e.g. Europe/Berlin
);
