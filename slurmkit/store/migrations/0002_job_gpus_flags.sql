-- slurmkit accounting store, version 2: per-GPU rows say when their numbers are incomplete.
-- flags: comma-separated, from the node epilog: no-sampler, sampler-died, sampler-killed, no-samples,
-- source-unavailable, admin-comment-failed (see slurmkit/accounting/hooks.py). NULL = nothing to note.

ALTER TABLE job_gpus ADD COLUMN flags TEXT;
