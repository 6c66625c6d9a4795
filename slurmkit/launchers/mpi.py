"""launcher: mpi - srun starts one MPI rank per GPU through the site's MPI plugin."""

from __future__ import annotations

from slurmkit.launchers.base import Site, register_launcher
from slurmkit.launchers.srun import Srun


@register_launcher
class Mpi(Srun):
    name = "mpi"
    summary = "one MPI rank per GPU via srun, nearest HCA per rank"
    explanation = (
        "Like `srun` (one task per GPU, each bound to its GPU's NUMA node), but the step is started through "
        "srun's MPI plugin (`--mpi=`, the site's `mpi:`), so the tasks form one MPI job, and each rank's UCX uses "
        "its GPU's nearest HCA (`UCX_NET_DEVICES=<hca>:1`). Do not call mpirun yourself.")
    ucx_per_rank = True

    def srun_options(self, site: Site) -> list[str]:
        return [f"--mpi={site.mpi}"]
