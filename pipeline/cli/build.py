"""``envfoundry build``: synthesise one environment from a scenario text and write its directory."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import client_from_config, emit_json, json_option, llm_options
from pipeline.config import Config


def _name_from_text(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9']+", text)
    return " ".join(words[:6])[:80] or "environment"


def register(main: click.Group) -> None:
    @main.command()
    @click.option("--scenario", "scenario_text", required=True,
                  help='What the application does, e.g. "A small public library lends books to members".')
    @click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Environment directory to write (env.json, schema.sql, initial.db, server.py, ...).")
    @click.option("--name", default=None, help="Scenario name (default: the first words of --scenario).")
    @click.option("--max-attempts", type=click.IntRange(1, 10), default=None,
                  help="LLM replies per step, the first one included (default 3; [stages.build] in --config).")
    @llm_options(stages={"max_attempts": "build.max_attempts"})
    @json_option
    def build(scenario_text: str, out_dir: Path, name: str | None, config: Config, as_json: bool) -> None:
        """Build one environment: intents -> schema -> seed rows -> tools, each checked in SQLite.

        Exits 1 (writing nothing) when a stage gives up, printing the recorded reasons.
        """
        from pipeline import ir
        from pipeline.build import build_environment
        from pipeline.envdir import write_env_dir

        settings = config.stages.build
        scenario = ir.Scenario(name=name or _name_from_text(scenario_text), description=scenario_text.strip())
        client = client_from_config(config)
        if not as_json:
            click.echo(f"building {scenario.name!r} with {client.describe()}", err=True)
        result = build_environment(scenario, client, settings)
        summary = result.summary()
        summary["usage"] = result.usage
        summary["timings"] = result.timings
        if result.env is not None:
            report = {"build": {"settings": settings.model_dump(mode="json"), "usage": result.usage,
                                "timings": result.timings, "intents": [i.model_dump() for i in result.intents],
                                "rejections": [r.model_dump(mode="json") for r in result.rejections]}}
            write_env_dir(result.env, out_dir, report=report)
            summary["out"] = str(out_dir)
        if as_json:
            emit_json(summary)
        else:
            _echo_summary(summary)
        if result.env is None:
            sys.exit(1)


def _echo_summary(s: dict[str, Any]) -> None:
    llm = s["llm"]
    if s["ok"]:
        click.echo(f"built {s['env_id']} -> {s['out']}")
        rows = ", ".join(f"{t} {n}" for t, n in s["rows"].items())
        click.echo(f"tables:     {len(s['tables'])} ({rows} rows)")
        click.echo(f"tools:      {len(s['tools'])} ({', '.join(s['tools'])})")
    else:
        click.echo("environment rejected", err=True)
    click.echo(f"rejections: {len(s['rejections'])}", err=not s["ok"])
    for r in s["rejections"]:
        click.echo(f"  [{r['stage']}] {r['item']}: {r['reason']}", err=not s["ok"])
    click.echo(f"llm:        {llm['calls']} calls, {llm['prompt_tokens']} prompt + {llm['completion_tokens']} "
               f"completion tokens; {s['seconds']:.1f}s")
