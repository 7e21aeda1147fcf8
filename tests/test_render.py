"""server.py rendering: deterministic, self-contained, ruff-clean, and a working --check."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from pipeline.cli.envs import register
from pipeline.envdir import load_env_dir, write_env_dir
from pipeline.runtime.schemas import result_schemas, tool_schemas
from pipeline.server.render import ENGINE_PATH, GATE_PATH, check_server, render_server
from tests.fixtures.library import library_env, library_tasks

ENV = library_env()


def cli() -> click.Group:
    group = click.Group("envfoundry")
    register(group)
    return group


def test_render_is_deterministic(tmp_path):
    first = render_server(ENV)
    assert render_server(library_env()) == first
    d = write_env_dir(ENV, tmp_path / "d")
    env, _, _ = load_env_dir(d)
    assert render_server(env) == first == (d / "server.py").read_text()
    changed = ENV.model_copy(update={"clock": "2027-02-02T10:00:00"})
    assert render_server(changed) != first


def test_server_embeds_the_engine_verbatim_and_imports_no_project_code():
    source = render_server(ENV)
    assert ENGINE_PATH.read_text() in source and GATE_PATH.read_text() in source
    assert "class Sessions:" in source and "class RequestGate:" in source
    assert "envfoundry:engine-import" not in source
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported.isdisjoint({"pipeline", "verify", "tests"}), imported
    assert imported <= {"datetime", "json", "math", "re", "sqlite3", "time", "anyio", "argparse", "asyncio", "concurrent", "contextlib",
                        "os", "sys", "threading",
                        "hmac", "urllib", "socket", "importlib", "mcp", "uvicorn", "fastapi", "starlette"}, imported
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert {"ENV", "TOOL_SCHEMAS", "RESULT_SCHEMAS", "ENV_ID", "main", "run_tool", "RequestGate"} <= names


def test_server_literals_are_the_ir_and_the_schemas():
    namespace: dict = {}
    source = render_server(ENV)
    literals = source[source.index("ENV_ID = "): source.index('if __name__ == "__main__"')]
    exec(compile(literals, "server-literals", "exec"), namespace)  # literals only: no code runs
    assert namespace["ENV_ID"] == ENV.env_id
    assert namespace["ENV"] == ENV.model_dump(mode="json")
    assert namespace["TOOL_SCHEMAS"] == tool_schemas(ENV)
    assert namespace["RESULT_SCHEMAS"] == result_schemas(ENV)


def test_server_is_ruff_clean(tmp_path):
    path = tmp_path / "server.py"
    path.write_text(render_server(ENV))
    ruff = Path(sys.executable).parent / "ruff"
    out = subprocess.run([str(ruff), "check", "--no-cache", "--isolated", "--select", "E,F,I,B,UP", "--ignore", "E501",
                          "--target-version", "py311", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    compile(path.read_text(), str(path), "exec")


def test_check_server_detects_stale_or_missing_files(tmp_path):
    d = write_env_dir(ENV, tmp_path / "d", library_tasks(ENV))
    assert check_server(d)
    server = d / "server.py"
    server.write_text(server.read_text().replace("MAX_BODY_BYTES = 1 << 20", "MAX_BODY_BYTES = 1 << 30"))
    assert not check_server(d)
    write_env_dir(ENV, d, library_tasks(ENV))
    assert check_server(d)
    other = ENV.model_copy(update={"clock": "2027-02-02T10:00:00"})
    (d / "env.json").write_text(other.model_dump_json())
    assert not check_server(d)
    server.unlink()
    assert not check_server(d)


def test_cli_render_check_and_rewrite(tmp_path):
    d = write_env_dir(ENV, tmp_path / "d")
    runner = CliRunner()
    ok = runner.invoke(cli(), ["render", "--check", str(d)])
    assert ok.exit_code == 0, ok.output
    assert "up to date" in ok.output
    (d / "server.py").write_text("# edited by hand\n")
    stale = runner.invoke(cli(), ["render", "--check", str(d)])
    assert stale.exit_code == 1
    assert "differs from a fresh render" in stale.output and "envfoundry render" in stale.output
    assert (d / "server.py").read_text() == "# edited by hand\n"  # --check writes nothing
    fixed = runner.invoke(cli(), ["render", str(d)])
    assert fixed.exit_code == 0 and check_server(d)
    missing = runner.invoke(cli(), ["render", "--check", str(tmp_path)])
    assert missing.exit_code == 2 and "has no env.json" in missing.output


def test_every_command_has_help():
    group = cli()
    assert set(group.commands) == {"serve", "render"}
    for name, command in group.commands.items():
        assert command.help, name
        result = CliRunner().invoke(group, [name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output
