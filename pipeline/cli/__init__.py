"""The ``envfoundry`` command: one namespaced CLI, a thin layer over the library.

Each area registers its subcommands from its own module (``register(main)``).
"""

from __future__ import annotations

import click

from pipeline.cli import build as _build
from pipeline.cli import check as _check
from pipeline.cli import envs as _envs
from pipeline.cli import eval as _eval
from pipeline.cli import export as _export
from pipeline.cli import llm as _llm
from pipeline.cli import report as _report
from pipeline.cli import run as _run
from pipeline.cli import sample as _sample
from pipeline.cli import seeds as _seeds
from pipeline.cli import verify as _verify
from pipeline.cli.common import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="envfoundry")
def main() -> None:
    """envfoundry: synthesise verified tool-use RL environments for LLM agents."""


for _mod in (_llm, _seeds, _build, _check, _envs, _verify, _run, _export, _eval, _report, _sample):
    _mod.register(main)
