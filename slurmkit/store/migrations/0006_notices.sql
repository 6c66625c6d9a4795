-- slurmkit accounting store, version 6: notices sent to job owners (slurmkit/notify, `sk admin notify idle`).
-- One row per notice and job run, written in the same transaction that decides to send it and committed only
-- after the SMTP server accepted the message: a run is never noticed twice, a failed send is retried.
-- (Version 5 is the record contract's usage_rollup_sources.)

CREATE TABLE IF NOT EXISTS notices (
    notice      TEXT    NOT NULL,               -- what was sent: idle-gpus
    cluster     TEXT    NOT NULL,
    job_id      BIGINT  NOT NULL,
    run         INTEGER NOT NULL,               -- restart count: a requeued job's next run is a new job run
    user_name   TEXT,
    recipient   TEXT    NOT NULL,
    phase       TEXT    NOT NULL,               -- running | finished: what the job was doing when noticed
    idle_gpus   INTEGER NOT NULL,
    idle_s      DOUBLE PRECISION,               -- the longest idle time the notice named
    sent_at     BIGINT  NOT NULL,               -- epoch seconds, UTC
    message_id  TEXT,
    PRIMARY KEY (notice, cluster, job_id, run)
);
