-- slurmkit accounting store, version 3: the usage rollup behind fast reports (slurmkit/store/rollup.py).
-- rollup_buckets: one row per UTC day (and per UTC month, added by refresh) that holds job runs by start_time.
-- usage_rollup: per bucket and report key, the sums of the report figures of the runs starting in the bucket.
-- A bucket is used by reports only while stale = 0 and its idle_pct is the report's; every writer of jobs and
-- job_gpus marks the days it touches stale in its own transaction, and refresh recomputes them.

CREATE TABLE IF NOT EXISTS rollup_buckets (
    lo          BIGINT  NOT NULL,               -- [lo, hi): epoch seconds, UTC
    hi          BIGINT  NOT NULL,
    max_end     BIGINT,                         -- latest end_time of a run starting here (an upper bound)
    stale       INTEGER NOT NULL DEFAULT 1,     -- 1: usage_rollup rows missing or out of date
    idle_pct    DOUBLE PRECISION,               -- the idle threshold the rows were computed with
    PRIMARY KEY (lo, hi)
);

CREATE TABLE IF NOT EXISTS usage_rollup (
    lo              BIGINT  NOT NULL,
    hi              BIGINT  NOT NULL,
    cluster         TEXT,
    user_name       TEXT,
    account         TEXT,
    partition       TEXT,
    gpu_types       TEXT,
    node_type       TEXT,
    qos             TEXT,
    jobs            BIGINT,
    gpu_s           BIGINT,                     -- sum of gpus x run seconds
    measured_s      BIGINT,
    util_s          DOUBLE PRECISION,           -- sum of (sum of util_mean over the run's GPUs) x run seconds
    idle_s          DOUBLE PRECISION,
    idle_multi      BIGINT,
    idle_multi_s    BIGINT,
    no_metrics      BIGINT,
    wait_sum        BIGINT,
    wait_n          BIGINT,
    wait_max        BIGINT,
    n_nvml          BIGINT,
    n_dcgm          BIGINT,
    n_slurm         BIGINT,
    n_simulated     BIGINT
);

CREATE INDEX IF NOT EXISTS usage_rollup_bucket ON usage_rollup (lo, hi);
CREATE INDEX IF NOT EXISTS jobs_start_time ON jobs (start_time);

-- Backfill: every day that holds job runs, stale; the next `sk admin ingest` computes its rows.
INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / 86400 * 86400, start_time / 86400 * 86400 + 86400, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / 86400;
