"""Pydantic models built from tool specs, so schema-constrained decoding only produces calls whose
argument names and types exist (used by the task agent and the tester), and compact tool listings
for prompts."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.ir import DATETIME_PATTERN, Environment, Param, Tool

_PY = {"string": str, "integer": int, "number": float, "boolean": bool}


def camel(name: str) -> str:
    return "".join(p.capitalize() for p in re.split(r"_+", name) if p) or "X"


def param_annotation(p: Param, choices: list[Any] | None = None) -> tuple[Any, Any]:
    """(type, default-or-Field) for one parameter; ``choices`` narrows it to known values."""
    values = choices if choices else p.enum
    typ: Any = Literal[tuple(values)] if values else _PY[p.type]  # type: ignore[valid-type]
    kw: dict[str, Any] = {}
    if not values:
        if p.type == "string" and p.format is not None:  # schema-constrained decoding writes the ISO form
            form: dict[str, Any] = {"format": "date"} if p.format == "date" else {"pattern": DATETIME_PATTERN}
            typ = Annotated[str, Field(max_length=p.max_length or 200, json_schema_extra=form)]
        elif p.type in ("integer", "number"):
            if p.minimum is not None:
                kw["ge"] = p.minimum
            if p.maximum is not None:
                kw["le"] = p.maximum
        elif p.type == "string":
            kw["max_length"] = p.max_length or 200
    if p.required:
        return typ, Field(..., **kw)
    return typ | None, Field(None, **kw)


def args_model(tool: Tool, choices: dict[str, list[Any]] | None = None, prefix: str = "Args") -> type[BaseModel]:
    """A model of ``tool``'s arguments (no extra keys)."""
    fields = {p.name: param_annotation(p, (choices or {}).get(p.name)) for p in tool.params}
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"{prefix}{camel(tool.name)}", __config__=ConfigDict(extra="forbid"), **fields
    )


def clean_args(args: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """Arguments as a plain dict without nulls (an absent optional parameter)."""
    data = args.model_dump(mode="json") if isinstance(args, BaseModel) else dict(args)
    return {k: v for k, v in data.items() if v is not None}


def signature(tool: Tool) -> str:
    """``name(a: integer, b?: string one of x|y): description`` — compact and model-friendly."""
    parts = []
    for p in tool.params:
        s = f"{p.name}{'' if p.required else '?'}: {p.type}"
        if p.enum:
            s += " one of " + "|".join(str(e) for e in p.enum)
        if p.minimum is not None or p.maximum is not None:
            lo = "" if p.minimum is None else f"{p.minimum:g}"
            hi = "" if p.maximum is None else f"{p.maximum:g}"
            s += f" {lo}..{hi}"
        if p.description:
            s += f" ({p.description})"
        parts.append(s)
    return f"{tool.name}({', '.join(parts)}): {tool.description}"


def catalog(env: Environment, names: list[str] | None = None) -> str:
    tools = [t for t in env.tools if names is None or t.name in names]
    return "\n".join(f"- {signature(t)}" for t in tools)
