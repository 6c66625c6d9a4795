-- slurmkit accounting store, version 5: the usage rollup counts GPU records per metric source in rows, one per
-- (bucket, report key, source), instead of one column per source (n_nvml, n_dcgm, n_slurm, n_simulated): any
-- number of sources, and a new one needs no migration. The version 4 counts move into the new table unchanged
-- (same buckets, keys and counts; zero counts are not kept), then the four columns are dropped
-- (SQLite >= 3.35, PostgreSQL >= 12).

CREATE TABLE IF NOT EXISTS usage_rollup_sources (
    lo              BIGINT  NOT NULL,           -- the bucket [lo, hi) of usage_rollup
    hi              BIGINT  NOT NULL,
    cluster         TEXT,
    user_name       TEXT,
    account         TEXT,
    partition       TEXT,
    gpu_types       TEXT,
    node_type       TEXT,
    qos             TEXT,
    source          TEXT    NOT NULL,           -- the job_gpus rows' source (slurmkit/record.py METRIC_SOURCES)
    gpu_records     BIGINT  NOT NULL            -- job_gpus rows with metrics of the runs starting in the bucket
);

CREATE INDEX IF NOT EXISTS usage_rollup_sources_bucket ON usage_rollup_sources (lo, hi);

INSERT INTO usage_rollup_sources (lo, hi, cluster, user_name, account, partition, gpu_types, node_type, qos, source,
                                  gpu_records)
SELECT lo, hi, cluster, user_name, account, partition, gpu_types, node_type, qos, 'nvml', n_nvml
FROM usage_rollup WHERE n_nvml > 0
UNION ALL
SELECT lo, hi, cluster, user_name, account, partition, gpu_types, node_type, qos, 'dcgm', n_dcgm
FROM usage_rollup WHERE n_dcgm > 0
UNION ALL
SELECT lo, hi, cluster, user_name, account, partition, gpu_types, node_type, qos, 'slurm', n_slurm
FROM usage_rollup WHERE n_slurm > 0
UNION ALL
SELECT lo, hi, cluster, user_name, account, partition, gpu_types, node_type, qos, 'simulated', n_simulated
FROM usage_rollup WHERE n_simulated > 0;

ALTER TABLE usage_rollup DROP COLUMN n_nvml;
ALTER TABLE usage_rollup DROP COLUMN n_dcgm;
ALTER TABLE usage_rollup DROP COLUMN n_slurm;
ALTER TABLE usage_rollup DROP COLUMN n_simulated;
