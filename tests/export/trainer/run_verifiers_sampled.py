"""Run inside the verifiers trainer venv: load an exported package that carries sampled tasks by level with the
real verifiers library: ``load_environment(level=L, n=K)`` twice (the same tasks), ``n`` alone over the bank, each
sampled task's ground-truth check (``Task.validate``, what ``vf-validate`` runs), and the errors for a level without
sampled tasks and for ``n`` beyond a level's pool. Prints one JSON report."""

import asyncio
import importlib
import json
import sys


def tasks_of(mod, **kwargs) -> list:
    return list(mod.load_environment(**kwargs).taskset)


def error_of(mod, **kwargs) -> str | None:
    try:
        tasks_of(mod, **kwargs)
    except Exception as exc:  # what a trainer sees
        return f"{type(exc).__name__}: {exc}"
    return None


async def validate(tasks) -> list[bool]:
    return [await t.validate(None) for t in tasks]


def main() -> None:
    package, level, n, missing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    mod = importlib.import_module(package)
    first = tasks_of(mod, level=level, n=n)
    again = tasks_of(mod, level=level, n=n)
    whole = tasks_of(mod, level=level)
    bank = tasks_of(mod, n=2)
    report = {
        "first": [t.data.task_id for t in first],
        "again": [t.data.task_id for t in again],
        "whole": [t.data.task_id for t in whole],
        "levels": [t.data.level for t in whole],
        "prompts": [t.data.prompt for t in whole],
        "bank": [t.data.task_id for t in bank],
        "bank_levels": [t.data.level for t in bank],
        "valid": asyncio.run(validate(whole)),
        "missing_level": error_of(mod, level=missing),
        "too_many": error_of(mod, level=level, n=len(whole) + 1),
    }
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
