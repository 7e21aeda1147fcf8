"""schemathesis (property-based API testing from the OpenAPI document) against the committed example
environment, served by its server.py alone over loopback: every check schemathesis has (no response >= 500,
status codes, content types, headers and bodies conform to the document, schema-invalid input rejected,
405 with Allow, ...) passes. Schema-valid input may still break a rule of the tool (a guard, a missing
record, a database constraint): that is a 400 by contract, so 400 counts as an answer to valid input."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.server import running_server

EXAMPLE_ENVS = sorted((Path(__file__).resolve().parents[1] / "generated" / "quickstart" / "envs").glob("*/server.py"))
CONFIG = """[checks.positive_data_acceptance]
expected-statuses = ["2XX", "400"]
"""


@pytest.mark.parametrize("server", EXAMPLE_ENVS, ids=lambda p: p.parent.name)
def test_schemathesis_finds_no_failure(server, tmp_path):
    cli = Path(sys.executable).parent / "schemathesis"
    assert cli.is_file(), f"{cli} is missing: install the dev extra (pip install -e '.[dev]')"
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(server, alone / "server.py")
    db = tmp_path / "live.db"
    shutil.copyfile(server.parent / "initial.db", db)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    with running_server(alone, db) as base:
        out = subprocess.run(
            [str(cli), "--config-file", str(tmp_path / "schemathesis.toml"), "run", base + "/openapi.json",
             "--checks", "all", "--max-examples", "15", "--seed", "20261115", "--workers", "2",
             "--request-timeout", "20", "--report", "junit", "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "passed" in out.stdout and "failed" not in out.stdout.split("SUMMARY")[-1], out.stdout[-3000:]
