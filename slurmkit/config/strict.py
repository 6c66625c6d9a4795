"""Shared base for the typed models (job spec, site config) and pydantic-error -> Problem translation."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from slurmkit.config.source import Source
from slurmkit.config.suggest import did_you_mean
from slurmkit.errors import InputError, Problem

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Unknown keys are errors (with a suggestion), never silently ignored.

    defer_build: a model's validator is built when it first validates, not at import (~40 ms for all of them):
    a command builds only those it uses.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=True, defer_build=True)


def _fields_at(model: type[BaseModel], path: tuple) -> list[str]:
    """The field names valid at `path` inside `model`, for 'did you mean' on unknown keys."""
    cls: Any = model
    for part in path:
        if isinstance(part, int) or cls is None:
            continue
        info = getattr(cls, "model_fields", {}).get(part)
        if info is None:
            return []
        cls = _model_of(info.annotation)
    if cls is None or not hasattr(cls, "model_fields"):
        return []
    return [f.alias or name for name, f in cls.model_fields.items()]


def _model_of(annotation: Any) -> Any:
    """The BaseModel inside an annotation such as `Foo | None`, `list[Foo]`, `dict[str, Foo]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _clean_loc(loc: tuple) -> tuple:
    """Drop pydantic's union/function tags (e.g. 'function-after[...]', 'str') from an error location."""
    out = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part in {"str", "int", "list[str]", "list[...]"}):
            continue
        out.append(part)
    return tuple(out)


def problems_from(exc: ValidationError, model: type[BaseModel], src: Source) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = _clean_loc(err["loc"])
        if err["type"] == "extra_forbidden":
            key = str(loc[-1])
            hint = did_you_mean(key, _fields_at(model, loc[:-1]))
            problems.append(src.problem(loc, "unknown key", hint=hint))
            continue
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if err["type"] == "missing":
            msg = "required key is missing"
        elif "input" in err and err["type"] not in {"value_error", "assertion_error"}:
            got = err["input"]
            if not isinstance(got, dict | list):
                msg += f" (got {got!r})"
        problems.append(src.problem(loc, msg))
    return problems


def validate(model: type[M], src: Source, error: type[InputError] = InputError) -> M:
    """Validate a parsed YAML document against `model`; raise `error` with every problem located."""
    try:
        return model.model_validate(src.data)
    except ValidationError as exc:
        raise error(problems_from(exc, model, src)) from None
