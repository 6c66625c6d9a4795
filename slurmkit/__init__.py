"""slurmkit: job specs -> correct sbatch scripts for GPU nodes -> Slurm -> per-job GPU records -> reports.

The flow is visible in the package layout:

    spec.py (what the user writes) + site.py (what the admin describes)
      -> plan.py (binding recipe, sbatch options, NCCL env; nccl.py lints)
      -> render.py (Jinja2 templates in job_templates/, every value shell-quoted)
      -> backends/ (cli, rest, pyslurm) -> job.py (status of a submitted job)
      -> accounting/ (node sampler, hooks, spool) -> store/ -> report/
"""

__version__ = "0.1.0"
