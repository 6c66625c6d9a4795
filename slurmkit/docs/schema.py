"""A reference table for a pydantic model, read from its JSON schema and fields: what the docs print as the job-spec
(and site-config) reference, so the documentation can never list a key the validator does not accept.

Examples come from the shipped examples/*.yaml where one sets the key (the reader can open that file); for the
other keys from `CURATED`, and every example is validated against the model before it is printed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from slurmkit.errors import SlurmkitError


@dataclass
class FieldDoc:
    name: str  # dotted key, e.g. "preempt.grace"
    type: str
    required: bool
    default: str | None
    allowed: str
    description: str
    example: str | None = None
    example_source: str | None = None  # file the example was taken from, or None (curated)
    ref: str | None = None  # anchor of the nested model's section


@dataclass
class ModelDoc:
    key: str  # "" for the top level, else the key the model sits under (e.g. "container")
    title: str
    description: str
    fields: list[FieldDoc] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return "ref-" + (self.key.replace(".", "-") or "top")


# Job-spec keys that no shipped example sets: a value a reader can copy. Validated before printing.
CURATED: dict[str, Any] = {
    "partition": "gpu",
    "account": "proj-llm",
    "qos": "normal",
    "gpus": 16,
    "gpu_type": "a100",
    "exclusive": True,
    "workdir": "/scratch/me/run1",
    "output": "logs/%x-%j.out",
    "error": "logs/%x-%j.err",
    "modules": ["cuda/12.4", "nccl/2.21"],
    "dependency": {"afterok": [123456, "preprocess"]},
    "mail": {"user": "me@example.org", "type": ["END", "FAIL"]},
    "master_port": 29500,
    "sbatch_extra": {"constraint": "hdr", "reservation": "big-run"},
    "nccl": {"debug": "INFO", "debug_subsys": "INIT,NET", "env": {"NCCL_IB_RETRY_CNT": 7},
             "allow_unknown": ["NCCL_MY_VENDOR_KNOB"]},
    "array": {"tasks": [{"lr": 0.1}, {"lr": 0.01}], "max_parallel": 1},
    "container": {"image": "/shared/images/pytorch.sif", "runtime": "apptainer", "mounts": ["/data:/data:ro"],
                  "workdir": "/workspace"},
    "preempt": {"signal": "USR1", "grace": 120, "requeue": True, "max_restarts": 3},
    "env": {"OMP_NUM_THREADS": 8},
    "binding": "membind",
}

_SCALARS = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean", "null": "null"}


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        return defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def type_text(node: dict[str, Any], defs: dict[str, Any]) -> str:
    """A JSON-schema node as a reader's type: 'integer', 'string or list of string', 'mapping ...'."""
    if "$ref" in node:
        return "mapping (" + node["$ref"].rsplit("/", 1)[-1] + ")"
    if "anyOf" in node:
        parts = [type_text(p, defs) for p in node["anyOf"] if p.get("type") != "null"]
        return " or ".join(dict.fromkeys(parts))
    if "enum" in node:
        return _SCALARS.get(node.get("type", "string"), "string")
    kind = node.get("type")
    if kind == "array":
        return "list of " + type_text(node.get("items", {}), defs)
    if kind == "object":
        values = node.get("additionalProperties")
        names = node.get("propertyNames", {}).get("enum")
        keys = "key" if names else "name"
        if isinstance(values, dict):
            return f"mapping of {keys} to " + type_text(values, defs)
        return "mapping"
    return _SCALARS.get(kind or "", "any")


def allowed_text(node: dict[str, Any]) -> str:
    """Enumerations and bounds of a node (looking inside anyOf/items/keys), as a short phrase."""
    out: list[str] = []
    for part in node.get("anyOf", [node]):
        if "enum" in part:
            out.append("one of " + ", ".join(f"`{v}`" for v in part["enum"]))
        if part.get("exclusiveMinimum") is not None:
            out.append(f"more than {part['exclusiveMinimum']}")
        lo, hi = part.get("minimum"), part.get("maximum")
        if lo is not None and hi is not None:
            out.append(f"{lo} to {hi}")
        elif lo is not None:
            out.append(f"at least {lo}")
        elif hi is not None:
            out.append(f"at most {hi}")
        names = part.get("propertyNames", {}).get("enum")
        if names:
            out.append("keys: " + ", ".join(f"`{v}`" for v in names))
        items = part.get("items")
        if isinstance(items, dict) and "enum" in items:
            out.append("items: " + ", ".join(f"`{v}`" for v in items["enum"]))
    return "; ".join(out)


def yaml_value(key: str, value: Any) -> str:
    """`key: value` as one line of YAML flow style (what the reader would type)."""
    return yaml.safe_dump({key.rsplit(".", 1)[-1]: value}, default_flow_style=True, sort_keys=False,
                          width=10_000).strip()[1:-1]


def _default_text(info: Any) -> str | None:
    if info.is_required():
        return None
    value = info.default_factory() if info.default_factory is not None else info.default
    if value is None or value in ({}, [], ""):
        return None
    if isinstance(value, BaseModel):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    from slurmkit.config.strict import _model_of

    found = _model_of(annotation)
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


def model_docs(model: type[BaseModel], examples: dict[str, tuple[Any, str | None]] | None = None,
               key: str = "", title: str | None = None) -> list[ModelDoc]:
    """One ModelDoc for `model` and one per nested model (depth first), in field order."""
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    examples = examples or {}
    doc = ModelDoc(key=key, title=title or (f"`{key}`" if key else model.__name__),
                   description=(model.__doc__ or "").strip() if key or model.__doc__ else "")
    nested: list[ModelDoc] = []
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        node = schema["properties"][name]
        dotted = f"{key}.{name}" if key else name
        sub = _nested_model(info.annotation)
        description = info.description or ""
        if not description and sub is not None and sub.__doc__:
            description = sub.__doc__.strip().splitlines()[0]
        example = examples.get(dotted)
        fd = FieldDoc(name=dotted, type=type_text(node, defs), required=info.is_required(),
                      default=_default_text(info), allowed=allowed_text(_resolve(node, defs)),
                      description=description)
        if example is not None and sub is None:  # a nested model's keys have their own examples below
            fd.example, fd.example_source = yaml_value(dotted, example[0]), example[1]
        if sub is not None and not _is_mapping_of_models(node):
            child = model_docs(sub, examples, dotted)
            fd.ref = child[0].anchor
            nested.extend(child)
        doc.fields.append(fd)
    return [doc, *nested]


def _is_mapping_of_models(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" and "$ref" in (node.get("additionalProperties") or {})


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        dotted = f"{prefix}.{k}" if prefix else str(k)
        out[dotted] = v
        if isinstance(v, dict) and k not in ("env", "sbatch_extra", "dependency", "grid"):
            out.update(_flatten(v, dotted))
    return out


def spec_examples(example_files: list[Path], model: type[BaseModel]) -> dict[str, tuple[Any, str | None]]:
    """key -> (value, source file name) from the shipped examples, then CURATED for keys they do not set.

    A curated value that the model rejects is a bug in this module: the build stops rather than print it.
    """
    found: dict[str, tuple[Any, str | None]] = {}
    for path in example_files:
        data = yaml.safe_load(path.read_text()) or {}
        for k, v in _flatten(data).items():
            found.setdefault(k, (v, path.name))
    base = {"name": "example", "command": ["train.py"]}
    for k, v in CURATED.items():
        try:
            model.model_validate({**base, k: copy.deepcopy(v)})
        except ValidationError as exc:
            raise SlurmkitError(f"docs: the curated example for {k!r} is not a valid job spec: {exc}") from exc
        for fk, fv in _flatten({k: v}).items():
            found.setdefault(fk, (fv, None))
    return found
