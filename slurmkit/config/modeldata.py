"""What the planner asks of a job spec and a site config, and plain copies of validated ones.

A validated spec or site config is pure data that planning and rendering only read. Importing pydantic and
defining the models costs ~90 ms, about as much as everything else in a cold `sk render` together, so the
render/submit path (cli/actions.py) plans from plain copies of the validated models that configcache.py
remembers: on a repeated render neither pydantic nor PyYAML is imported. The models' methods live here, in
mixins that the pydantic models (spec.py, site.py) and the copies share, so the two cannot answer differently;
tests/test_modeldata.py renders every example on every site both ways and compares.
"""

from __future__ import annotations

import shlex
from itertools import product
from pathlib import Path
from typing import Any

from slurmkit.config.units import parse_cpulist, parse_mem_mib, parse_time_minutes

# Mixins: every method or property of a model lives here, never in the pydantic class body. They read the
# model's fields (no annotations here: pydantic would take them for fields).


class GPUMixin:
    @property
    def cpu_list(self) -> list[int]:
        return parse_cpulist(self.cpus)


class NodeTypeMixin:
    @property
    def memory_mib(self) -> int:
        return parse_mem_mib(self.memory)

    @property
    def cpus(self) -> int:
        """Logical CPUs per node (what Slurm's CPUs= counts when threads are schedulable)."""
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def gpu_by_index(self, index: int) -> Any:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)


class PartitionMixin:
    @property
    def max_minutes(self) -> int:
        return parse_time_minutes(self.max_time)


class SiteMixin:
    @property
    def slurm_version_tuple(self) -> tuple[int, int]:
        major, _, minor = self.slurm_version.partition(".")
        return int(major), int((minor or "0").split(".")[0])

    def partition(self, name: str) -> Any:
        return self.partitions[name]

    def node_type_of(self, partition: str) -> Any:
        return self.node_types[self.partitions[partition].node_type]

    def resolve_path(self, value: str) -> Path:
        """Paths in a site config are relative to the file they are written in."""
        p = Path(value).expanduser()
        if not p.is_absolute() and self.source_file:
            p = Path(self.source_file).parent / p
        return p


class ArraySpecMixin:
    @property
    def names(self) -> list[str]:
        return list(self.grid) if self.grid is not None else list(self.tasks[0])  # type: ignore[index]

    @property
    def size(self) -> int:
        if self.grid is not None:
            n = 1
            for vals in self.grid.values():
                n *= len(vals)
            return n
        return len(self.tasks or [])

    def task(self, i: int) -> dict[str, Any]:
        """Parameters of task i (grid order: the LAST key varies fastest, like itertools.product)."""
        if self.tasks is not None:
            return self.tasks[i]
        assert self.grid is not None
        return dict(zip(self.grid, next(_nth(product(*self.grid.values()), i)), strict=True))


def _nth(it, n):
    for i, x in enumerate(it):
        if i == n:
            yield x
            return


class PreemptMixin:
    @property
    def requeue_after(self) -> int:
        """Seconds after the signal at which a step still running is requeued anyway: before Slurm's kill at the
        time limit (grace s after the signal), with a margin for the requeue itself."""
        return self.grace - max(5, self.grace // 10)


class JobSpecMixin:
    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)


# Plain copies.


class Plain:
    """A validated model's fields as plain attributes; a model without methods is copied to this class."""

    def __init__(self, **fields: Any):
        self.__dict__.update(fields)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class GPUData(GPUMixin, Plain):
    pass


class NodeTypeData(NodeTypeMixin, Plain):
    pass


class PartitionData(PartitionMixin, Plain):
    pass


class SiteData(SiteMixin, Plain):
    pass


class ArraySpecData(ArraySpecMixin, Plain):
    pass


class PreemptData(PreemptMixin, Plain):
    pass


class JobSpecData(JobSpecMixin, Plain):
    pass


_COPY_FOR = {GPUMixin: GPUData, NodeTypeMixin: NodeTypeData, PartitionMixin: PartitionData, SiteMixin: SiteData,
             ArraySpecMixin: ArraySpecData, PreemptMixin: PreemptData, JobSpecMixin: JobSpecData}


def plain_copy(value: Any) -> Any:
    """A pydantic model (recursively, through lists and dicts) as Plain objects with the same fields and methods."""
    model = type(value)
    if hasattr(model, "model_fields"):
        copy = next((c for mixin, c in _COPY_FOR.items() if isinstance(value, mixin)), Plain)
        return copy(**{name: plain_copy(getattr(value, name)) for name in model.model_fields})
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    return value
