"""``envfoundry check ENV_DIR...``: validate environment directories (also ones edited by hand)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pipeline.cli.common import emit_json, json_option


def register(main: click.Group) -> None:
    @main.command()
    @click.argument("env_dirs", metavar="ENV_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
    @click.option("--no-proofs", is_flag=True, default=False,
                  help="Skip replaying the tasks' reference solutions and proving their verifiers.")
    @json_option
    def check(env_dirs: tuple[Path, ...], no_proofs: bool, as_json: bool) -> None:
        """Validate environment directories: env.json loads, the schema builds, the seed rows insert, schema.sql
        and initial.db match env.json, every tool passes the static checks, server.py is a fresh render of
        env.json, and every task's reference solution replays and its verifier holds.

        Each problem names where it is (table, tool, task, file). Semantic findings (generated values that
        contradict their column's own example rows) are listed too, without failing the check. Exit 0: clean;
        1: problems found; 2: an ENV_DIR cannot be used (not a directory, no env.json).
        """
        from pipeline.envcheck import Unusable, check_env_dir

        reports, unusable = [], []
        for d in env_dirs:
            try:
                reports.append(check_env_dir(d, proofs=not no_proofs))
            except Unusable as e:
                unusable.append(str(e))
        if as_json:
            emit_json({"ok": not unusable and all(r.ok for r in reports), "unusable": unusable,
                       "envs": [r.to_json() for r in reports]})
        else:
            for r in reports:
                for p in r.problems:
                    click.echo(f"{r.env_dir}: {p.where}: {p.message}")
                for f in r.findings:
                    click.echo(f"{r.env_dir}: finding: {f['table']}.{f['column']} = {f['value']!r}: {f['contradicts']}")
                counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in r.checked.items())
                state = ("ok" if r.ok else f"{len(r.problems)} problem(s)") + (
                    f", {len(r.findings)} semantic finding(s)" if r.findings else "")
                click.echo(f"{r.env_dir}: {state}" + (f" ({counts} checked)" if counts else ""))
            for u in unusable:
                click.echo(f"error: {u}", err=True)
        sys.exit(2 if unusable else 0 if all(r.ok for r in reports) else 1)
