"""slurmkit: job specs -> correct sbatch scripts for GPU nodes -> Slurm -> per-job GPU records -> reports.

The flow is visible in the package layout:

    spec.py (what the user writes) + site/model.py (what the admin describes)
      -> plan.py (the launcher from launchers/, sbatch options, NCCL env; nccl.py: fabric profiles, lint)
      -> render.py (Jinja2 templates in job_templates/, every value shell-quoted)
      -> backends/ (cli, rest, pyslurm) -> job.py (status of a submitted job); api.py: all of it from Python
      -> accounting/ (node sampler, hooks, spool) -> store/ -> report/
"""

__version__ = "0.1.0"

__all__ = ["Job", "JobFailed", "submit"]


def __getattr__(name: str):  # the Python API (slurmkit/api.py), imported on first use: hooks stay fast
    if name in __all__:
        from slurmkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'slurmkit' has no attribute {name!r}")
