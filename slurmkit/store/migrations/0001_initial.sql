-- slurmkit accounting store, version 1. Portable SQL: runs unchanged on SQLite (>= 3.24) and PostgreSQL (>= 12).
-- Times are epoch seconds, UTC. One row per job *run*: a requeued job gets a new row with run = restart count,
-- so a requeue is never double-counted nor lost.

CREATE TABLE IF NOT EXISTS jobs (
    cluster         TEXT    NOT NULL,
    job_id          BIGINT  NOT NULL,           -- Slurm JobId (for array tasks, the task's own job id)
    run             INTEGER NOT NULL DEFAULT 0, -- restart count (0 = first run; +1 per requeue)
    array_job_id    BIGINT,
    array_task_id   BIGINT,
    het_job_id      BIGINT,
    het_job_offset  INTEGER,
    job_name        TEXT,
    user_name       TEXT,
    uid             INTEGER,
    account         TEXT,
    partition       TEXT,
    qos             TEXT,
    state           TEXT,                       -- COMPLETED, FAILED, CANCELLED, TIMEOUT, REQUEUED, NODE_FAIL...
    exit_code       INTEGER,
    submit_time     BIGINT,
    start_time      BIGINT,
    end_time        BIGINT,
    elapsed_s       BIGINT,
    nodes           TEXT,                       -- Slurm hostlist, e.g. gpu[01-02]
    node_count      INTEGER,
    cpus            INTEGER,
    gpus            INTEGER NOT NULL DEFAULT 0, -- GPUs allocated to the whole job (all nodes)
    gpu_types       TEXT,                       -- comma-separated gres types, e.g. a100
    node_type       TEXT,                       -- site-config node type, when known
    tres            TEXT,                       -- Slurm's allocated TRES string as reported
    source          TEXT    NOT NULL,           -- jobcomp | reconcile | sacct-import
    flags           TEXT,                       -- comma-separated notes, e.g. late-gpu-metrics
    ingested_at     BIGINT,
    PRIMARY KEY (cluster, job_id, run)
);

CREATE INDEX IF NOT EXISTS jobs_end_time ON jobs (end_time);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs (user_name);
CREATE INDEX IF NOT EXISTS jobs_account ON jobs (account);

CREATE TABLE IF NOT EXISTS job_gpus (
    cluster         TEXT    NOT NULL,
    job_id          BIGINT  NOT NULL,
    run             INTEGER NOT NULL DEFAULT 0,
    node            TEXT    NOT NULL,
    gpu_index       INTEGER NOT NULL,           -- NVML index on that node
    uuid            TEXT,
    pci_bus_id      TEXT,
    model           TEXT,
    util_mean       DOUBLE PRECISION,           -- percent, 0-100, time-weighted over the job
    util_max        DOUBLE PRECISION,
    idle_fraction   DOUBLE PRECISION,           -- share of samples with utilization below the idle threshold
    mem_max_mib     BIGINT,
    mem_total_mib   BIGINT,
    energy_j        DOUBLE PRECISION,
    power_max_w     DOUBLE PRECISION,
    samples         INTEGER,
    interval_s      DOUBLE PRECISION,
    source          TEXT    NOT NULL,           -- nvml | dcgm | slurm | simulated
    PRIMARY KEY (cluster, job_id, run, node, gpu_index)
);

CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL PRIMARY KEY,
    applied_at  BIGINT  NOT NULL
);
