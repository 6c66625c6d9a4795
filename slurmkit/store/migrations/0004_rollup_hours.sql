-- slurmkit accounting store, version 4: the usage rollup is kept per UTC hour too (slurmkit/store/rollup.py), so
-- reports in a time zone a whole number of hours off UTC read whole buckets. Days are now sums of their hours and
-- months of their days: the version 3 rows are dropped, every hour holding job runs is marked stale, and the next
-- `sk admin ingest` (or `sk admin rebuild-rollup`) recomputes all of them. Until then reports compute run by run.

DELETE FROM usage_rollup;
DELETE FROM rollup_buckets;

INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / 3600 * 3600, start_time / 3600 * 3600 + 3600, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / 3600;
