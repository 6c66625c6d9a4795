"""Per-job GPU accounting: Slurm hooks -> durable spool -> store (slurmkit/accounting/ingest.py).

Modules on the hook path (hooks, record, spool, scontrol) import only the standard library: Slurm runs
jobcomp once per job, one at a time, so click/pydantic/yaml must stay off it.
"""
