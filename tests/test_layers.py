"""The layers only point down: cli -> run -> executor -> graph -> scenarios -> stages -> envdir / catalog -> verify -> dbmodel -> runtime ->
ir / llm / config / settings. (The catalog owns the files on disk, environment directories included, so ``envdir``
sits with it; it writes what ``verify`` proved, the task bank with verify's difficulty tags, so it sits above it.)

Every import counts, at the top of a module or inside a function. A module may import its own layer or a
lower one; a new top-level module or folder must be placed in ``LAYERS`` first.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# lowest first; a room is a top-level module of pipeline/ (or a folder of it), or the verify package
LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"pipeline", "pipeline.hashing", "pipeline.config", "pipeline.settings", "pipeline.settings_base", "pipeline.prompts",
              "pipeline.ir", "pipeline.llm", "pipeline.embed", "pipeline.seeds", "pipeline.atomic",
              "pipeline.meaning"}),  # language-neutral checks of meaning: imports no stage
    ("runtime", {"pipeline.runtime", "pipeline.server"}),  # the tool engine, replay, state and reward, server.py
    ("dbmodel", {"pipeline.dbmodel"}),  # what every stage reads about a database and its tools; imports no stage
    ("verify", {"verify"}),
    ("envdir", {"pipeline.envdir", "pipeline.catalog"}),  # the files on disk: written from verify's results
    ("stages", {"pipeline.stages"}),  # one package per graph node; they share only dbmodel and base/feedback
    ("scenarios", {"pipeline.scenarios"}),  # expand and dedup, with the stages' ask-with-feedback loop
    ("graph", {"pipeline.graph"}),
    ("executor", {"pipeline.executor"}),  # runs the graph per scenario, here or on Ray workers
    ("run", {"pipeline.run", "pipeline.build", "pipeline.eval", "pipeline.envcheck", "pipeline.export", "pipeline.report",
             "pipeline.sampler", "pipeline.perturb"}),  # the sampler plans and proves over an env dir, as eval reads one
    ("cli", {"pipeline.cli"}),
]
RANK = {room: i for i, (_, rooms) in enumerate(LAYERS) for room in rooms}


def _room(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "verify":
        return "verify"
    return ".".join(parts[:2])


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("pipeline", "verify"):
        for path in (ROOT / top).rglob("*.py"):
            if "templates" in path.relative_to(ROOT).parts:  # code emitted into exports, not imported here
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return [(m, line) for m, line in found if m.split(".")[0] in ("pipeline", "verify")]


def test_every_room_has_a_layer() -> None:
    rooms = {_room(m) for m in _modules()}
    assert rooms - set(RANK) == set(), "place these in LAYERS (tests/test_layers.py)"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for name, path in sorted(_modules().items()):
        mine = RANK.get(_room(name))
        for target, line in _imports(name, path):
            theirs = RANK.get(_room(target))
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {LAYERS[mine][0]} imports {target} "
                              f"({LAYERS[theirs][0]})")
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from pipeline.graph import verify_env\n")
    assert [RANK[_room(t)] for t, _ in _imports("verify.bad", bad)] == [RANK["pipeline.graph"]]
    assert RANK["pipeline.graph"] > RANK["verify"]


SHARED_STAGE_MODULES = {"pipeline.stages", "pipeline.stages.base", "pipeline.stages.feedback"}
"""The root of the stages package: what every stage shares (a stage's result, the ask-with-feedback loop)."""


def _stage(module: str) -> str | None:
    """The stage package of a module (``pipeline.stages.tools.toolset`` -> ``tools``); None outside one."""
    parts = module.split(".")
    if parts[:2] != ["pipeline", "stages"] or ".".join(parts[:3]) in SHARED_STAGE_MODULES:
        return None
    return parts[2] if len(parts) > 2 else None


def test_no_stage_imports_another_stage() -> None:
    """A stage reads what others also need from ``pipeline.dbmodel`` (or the stages' root), never from a peer."""
    across = []
    for name, path in sorted(_modules().items()):
        mine = _stage(name)
        if mine is None:
            continue
        for target, line in _imports(name, path):
            theirs = _stage(target)
            if theirs is not None and theirs != mine:
                across.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {target}")
    assert across == []


def test_the_stage_check_sees_a_peer_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from pipeline.stages.rows.populate import generate_seed_for\nfrom pipeline.stages import feedback\n")
    assert [_stage(t) for t, _ in _imports("pipeline.stages.tools.bad", bad)] == ["rows", None]
