#!/usr/bin/env python3
"""Issue 39, "The house": move pipeline/stages and the runtime pieces of verify/ into their rooms, mechanically.

Run at the root of an envfoundry checkout (clean work tree: commit first), e.g.::

    python3 docs/house/house_move.py --dry-run  # only checks the table covers the tree (exit 3 if not)
    python3 docs/house/house_move.py            # moves, rewrites, ruff-fixes, stages it all (git add)
    docs/house/validate_house.sh .              # ruff, mypy, cycles, layers+lint tests, byte-identical run
    git commit -m "The house (issue 39): ..."             # commits what the script staged

A new stage module stops it (exit 3) with its name: rerun with ``--place pipeline.stages.x=pipeline.stages.tools.x``
(or ``pipeline.stages.x=`` to leave it). ``--no-protocol`` skips step 6. Exit 1: an extraction left an undefined name.

What it does (no behaviour change; see README of the issue):

1. ``git mv`` every module named in ``MODULES`` (old dotted name -> new dotted name). Every module under
   pipeline/stages/ must be in the table (``None`` = stays): a module the table does not know (new since the
   table was written) stops the script with its name, unless placed with ``--place OLD=NEW`` (or ``OLD=``
   to leave it where it is).
2. ``EXTRACT``: a few top-level definitions leave a stage module for the lower package (the schema stage's
   column introspection); the new module gets a copy of the source's import block (unused ones removed by
   ruff), the source imports the names back from it, and every ``from <source> import <name>`` elsewhere
   imports them from the new home (``SYMBOLS``, which also redirects names a module only re-exported).
3. Rewrites every ``.py`` under pipeline/ verify/ tests/ benchmarks/ scripts/: import statements from their
   AST (absolute and relative, ``import a.b as c``, ``from a import module as x``), everything else (strings
   for mock.patch / importlib, docstrings, comments) by exact dotted-name tokens (``pipeline.stages.schema``,
   ``verify.reward``, longest first) and exact path tokens (``pipeline/stages/schema.py``). A relative import
   that still resolves to the right module from the file's new place is left byte for byte (the vendored
   runtime files import each other relatively). pipeline/export/common.py's ``REPO_SRC / "verify" / "x.py"``
   paths follow the files. prompts/ and README/docs/CHANGELOG are not touched (prompt text is a cache key).
4. Writes the new packages' ``__init__.py`` and updates tests/test_layers.py ``LAYERS``.
5. ``ruff check --fix --select I001,F401`` on the touched files (import order after renames; imports the
   extraction left unused), ``git add`` of all it touched, then prints what is left for a human: cross-stage
   imports that remain.
6. Writes pipeline/llm/protocol.py (``LLMClientProtocol``: the members the pipeline calls on a client) and types
   every ``client: Any`` parameter/field under pipeline/stages, scenarios, graph, executor, build.py and verify/
   with it (``client: Any = None`` / ``| None`` are left).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------------------------- the table

S = "pipeline.stages"
P = "pipeline.stages.planner"

MODULES: dict[str, str | None] = {
    # shared by every stage, at the root of the stages package (not a stage of their own)
    f"{S}": None,
    f"{S}.base": None,
    f"{S}.feedback": None,
    # scenarios: before any environment is built
    f"{S}.expand": "pipeline.scenarios.expand",
    f"{S}.dedup": "pipeline.scenarios.dedup",
    # the lower package: what every stage reads about a database and its tools; imports no stage
    f"{S}.ddl": "pipeline.dbmodel.ddl",
    f"{S}.keynames": "pipeline.dbmodel.keynames",
    f"{S}.paging": "pipeline.dbmodel.paging",
    f"{P}.analysis": "pipeline.dbmodel.analysis",
    f"{P}.ops": "pipeline.dbmodel.ops",
    f"{P}.keys": "pipeline.dbmodel.keys",
    # schema stage (intents feed it)
    f"{S}.intents": f"{S}.schema.intents",
    f"{S}.schema": f"{S}.schema.tables",
    # rows stage
    f"{S}.seed_data": f"{S}.rows.populate",
    f"{S}.rowgen": f"{S}.rows.generators",
    f"{S}.rowmake": f"{S}.rows.maker",
    # tools stage
    f"{S}.tools": f"{S}.tools.toolset",
    f"{S}.toolreply": f"{S}.tools.replies",
    f"{S}.amend": f"{S}.tools.amend_schema",
    f"{S}.coverage": f"{S}.tools.finder_gaps",
    f"{S}.covering": f"{S}.tools.write_gaps",
    f"{S}.paramnames": f"{S}.tools.param_names",
    f"{S}.exercise": f"{S}.tools.exercise",
    f"{S}.repair": f"{S}.tools.repair",
    # policy stage
    f"{S}.policy": f"{S}.policy.house_rules",
    f"{S}.rulegen": f"{S}.policy.candidates",
    # tasks stage (the planner inside)
    f"{S}.tasks": f"{S}.tasks.bank",
    f"{S}.conversation": f"{S}.tasks.conversation",
    f"{S}.wording": f"{S}.tasks.code_wording",
    f"{S}.phrasing": f"{S}.tasks.templates",
    f"{S}.finish": f"{S}.tasks.finish",
    f"{P}": f"{S}.tasks.planner",
    f"{P}.aggregates": f"{S}.tasks.planner.aggregates",
    f"{P}.chains": f"{S}.tasks.planner.chains",
    f"{P}.rules": f"{S}.tasks.planner.rules",
    f"{P}.shapes": f"{S}.tasks.planner.shapes",
    f"{P}.values": f"{S}.tasks.planner.values",
    # runtime code that stages and exports need, out of verify/ (values and usercheck go with reward: the
    # exports vendor the three side by side, importing each other relatively)
    "verify.state": "pipeline.runtime.state",
    "verify.replay": "pipeline.runtime.replay",
    "verify.reward": "pipeline.runtime.reward",
    "verify.values": "pipeline.runtime.values",
    "verify.usercheck": "pipeline.runtime.usercheck",
}
# verify/ modules not named above stay in verify/ (proofs, tester, checker, difficulty, ...): no check there.
MUST_BE_MAPPED = (S,)  # every module under these packages must be in MODULES


@dataclass(frozen=True)
class Extract:
    source: str  # old dotted module (the names leave it)
    names: tuple[str, ...]  # top-level definitions (class, def, assignment target)
    dest: str  # new dotted module
    doc: str  # its docstring


EXTRACT = [
    Extract(f"{S}.schema", ("Column", "_CHECK_IN", "_LITERAL", "check_enums", "table_columns"),
            "pipeline.dbmodel.columns",
            "A table's columns as every stage reads them: type, keys, defaults, ``CHECK (col IN (...))`` lists and\n"
            "foreign-key targets (:func:`table_columns`), from the database SQLite built from the DDL.\n\n"
            "(Moved out of the schema stage, which still uses it: the rows, tools and policy stages read it too.)"),
]

# (old module, name) -> new module: names imported from a module that only re-exported them (or that an
# extraction moved); applied to ``from old import name`` and to dotted text ``old.name``.
SYMBOLS: dict[tuple[str, str], str] = {
    (f"{S}.schema", "scratch_db"): "pipeline.dbmodel.ddl",
    (f"{S}.seed_data", "variants"): f"{S}.rows.maker",
}
for _e in EXTRACT:
    for _n in _e.names:
        SYMBOLS[(_e.source, _n)] = _e.dest

PACKAGE_DOCS = {
    "pipeline.dbmodel": "What every stage reads about a database and its tools: columns and CHECK lists (``columns``), the\n"
                        "DDL helpers and scratch databases (``ddl``), natural keys (``keys``) and key-column names\n"
                        "(``keynames``), what each tool takes and gives (``analysis``, ``ops``), paged listers (``paging``).\n"
                        "It imports no stage.",
    "pipeline.scenarios": "Before any environment: domain seeds expanded into scenarios (``expand``), near duplicates\n"
                          "dropped (``dedup``).",
    f"{S}.schema": "The schema stage: intents (``intents.generate_intents``), then the tables (``tables.generate_schema``).",
    f"{S}.rows": "The rows stage: ``populate.generate_seed`` fills every table, parents first (the LLM's example rows,\n"
                 "then ``generators`` / ``maker`` for rows at scale).",
    f"{S}.tools": "The tools stage: ``toolset.generate_tools`` plans and writes the tools; ``finder_gaps`` and\n"
                  "``write_gaps`` complete the set by code, ``param_names``, ``amend_schema``, ``exercise`` check it;\n"
                  "``repair`` rewrites a tool (or the data) the checker blamed.",
    f"{S}.policy": "The policy stage: ``house_rules.make_policy``; code proposes and checks the candidate rules\n"
                   "(``candidates``), the LLM picks and words them.",
    f"{S}.tasks": "The tasks stage: ``bank.generate_tasks`` (code plans with ``planner``, the LLM words the request;\n"
                  "``code_wording`` when it cannot), ``conversation`` forms, ``templates`` for the sampler, ``finish``.",
}

LAYERS_OLD = '    ("stages", {"pipeline.stages"}),\n'
LAYERS_NEW = ('    ("stages", {"pipeline.stages"}),  # one package per graph node; they share only dbmodel and base/feedback\n'
              '    ("scenarios", {"pipeline.scenarios"}),  # expand and dedup, with the stages\' ask-with-feedback loop\n')
LAYERS_RUNTIME_OLD = '    ("runtime", {"pipeline.runtime", "pipeline.server"}),  # the tool engine, and server.py made of it\n'
LAYERS_RUNTIME_NEW = (
    '    ("runtime", {"pipeline.runtime", "pipeline.server"}),  # the tool engine, replay, state and reward, server.py\n'
    '    ("dbmodel", {"pipeline.dbmodel"}),  # what every stage reads about a database and its tools; imports no stage\n')

REWRITE_DIRS = ("pipeline", "verify", "tests", "benchmarks", "scripts")

# step 6: the stages take an LLM client protocol instead of ``client: Any``
PROTOCOL_PATH = "pipeline/llm/protocol.py"
PROTOCOL_IMPORT = "from pipeline.llm.protocol import LLMClientProtocol"
PROTOCOL_DIRS = ("pipeline/stages", "pipeline/scenarios", "pipeline/graph", "pipeline/executor", "pipeline/build.py",
                 "verify")  # the path from run_catalog to the stages, and the tester/checker
PROTOCOL_SOURCE = '''"""What the stages call on an LLM client: :class:`LLMClientProtocol`.

:class:`~pipeline.llm.client.LLMClient` is one; so are the same client with other sampling settings
(``pipeline.llm.sampling.sampled``, ``Escalating``) and the scripted fakes of the tests. A stage's ``client``
parameter is typed with it, so mypy checks what the stages ask of a client (nothing else changes at run time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from pipeline.config import LLMSettings
from pipeline.llm.replies import Reply, Usage

T = TypeVar("T", bound=BaseModel)
X = TypeVar("X")
R = TypeVar("R")


class LLMClientProtocol(Protocol):
    """Structured replies (validated, retried with the validation error fed back, cached), and the means to
    overlap requests: see :class:`~pipeline.llm.client.LLMClient` for what each member does."""

    @property
    def settings(self) -> LLMSettings: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def parallelism(self) -> int: ...

    def map(self, fn: Callable[[X], R], items: Iterable[X], *, max_workers: int | None = None) -> list[R]: ...

    def structured(self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str,
                   max_tokens: int = 1024) -> T: ...

    def structured_reply(self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str,
                         max_tokens: int = 1024) -> tuple[T, Reply]: ...

    def prefetch(self, calls: Iterable[Callable[[], Any]]) -> None: ...
'''
CLIENT_ANY = re.compile(r"\bclient: Any\b(?!\s*(?:\||=))")
EXPORT_COMMON = "pipeline/export/common.py"

# --------------------------------------------------------------------------------------------- helpers


def die(msg: str) -> None:
    print(f"house_move: ERROR: {msg}", file=sys.stderr)
    sys.exit(2)


def git(root: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if r.returncode:
        die(f"git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def mod_path(name: str, package: bool) -> str:
    parts = name.split(".")
    return "/".join(parts) + ("/__init__.py" if package else ".py")


def module_of(rel: str) -> str:
    name = rel.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def tracked_modules(root: Path) -> dict[str, str]:
    """dotted module -> repo-relative path, for every tracked .py under pipeline/ and verify/."""
    out = {}
    for rel in git(root, "ls-files", "pipeline", "verify").split():
        if rel.endswith(".py"):
            out[module_of(rel)] = rel
    return out


def new_name(old: str, table: dict[str, str]) -> str:
    """The new dotted name of ``old`` (a module, a package, or either followed by attribute names)."""
    parts = old.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if i >= 2 and (".".join(parts[:i - 1]), parts[i - 1]) in SYMBOLS:
            return ".".join([SYMBOLS[(".".join(parts[:i - 1]), parts[i - 1])], parts[i - 1], *parts[i:]])
        if head in table:
            return ".".join([table[head], *parts[i:]])
    return old


# --------------------------------------------------------------------------------------------- extraction


def _node_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def extract(root: Path, ex: Extract, src_rel: str, dest_rel: str) -> None:
    """Cut ``ex.names`` out of ``src_rel`` into a new ``dest_rel`` (paths after the moves)."""
    path = root / src_rel
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    body = tree.body
    spans: list[tuple[int, int]] = []  # 0-based [start, end) line ranges
    found: set[str] = set()
    import_end = 0
    plain_imports: list[str] = []
    for i, node in enumerate(body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            import_end = max(import_end, node.end_lineno or 0)
            stmt = "".join(lines[node.lineno - 1: node.end_lineno]).rstrip("\n")
            plain_imports.append(re.sub(r"\s+# noqa.*$", "", stmt))  # so ruff may drop it when unused
        names = _node_names(node) & set(ex.names)
        if not names:
            continue
        if _node_names(node) - set(ex.names):
            die(f"{src_rel}:{node.lineno}: a statement defines {sorted(_node_names(node))}, only some extracted")
        found |= names
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        end = node.end_lineno or node.lineno
        # an attribute docstring right after an assignment goes with it
        if (i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and isinstance(body[i + 1].value, ast.Constant)
                and isinstance(body[i + 1].value.value, str) and not isinstance(node, (ast.FunctionDef, ast.ClassDef))):
            end = body[i + 1].end_lineno or end
        # comment lines directly above
        while start > 0 and lines[start - 1].lstrip().startswith("#") and not lines[start - 1].startswith("# ---"):
            start -= 1
        spans.append((start, end))
    # a section header left with nothing under it goes too
    spans.sort()
    a0, b1 = spans[0][0], spans[-1][1]
    above = a0 - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    below = b1
    while below < len(lines) and not lines[below].strip():
        below += 1
    between = all(not lines[i].strip() for i in range(a0, b1) if not any(a <= i < b for a, b in spans))
    if (between and above >= 0 and lines[above].startswith("# ---")
            and (below >= len(lines) or lines[below].startswith("# ---"))):
        header_span = (above, a0)
    else:
        header_span = (a0, a0)
    missing = set(ex.names) - found
    if missing:
        die(f"{src_rel}: EXTRACT names not found (renamed since the table was written?): {sorted(missing)}")
    # the source's top-level imports for the new module (ruff removes those it does not use; a name only
    # imported under TYPE_CHECKING there is reported as undefined by the F821 check below)
    imports = "\n".join(plain_imports)
    chunks = ["".join(lines[a:b]).strip("\n") for a, b in sorted(spans)]
    dest = f'"""{ex.doc}\n"""\n\n{imports}\n\n\n' + "\n\n\n".join(chunks) + "\n"
    (root / dest_rel).write_text(dest, encoding="utf-8")
    keep = [ln for i, ln in enumerate(lines) if not any(a <= i < b for a, b in [*spans, header_span])]
    # the source imports the names back (ruff drops those it no longer uses)
    back = f"from {ex.dest} import {', '.join(sorted(ex.names, key=lambda n: (n.lstrip('_').lower(), n)))}\n"
    cut = import_end - sum(1 for a, b in spans for i in range(a, b) if i < import_end)
    keep.insert(cut, back)
    new = re.sub(r"\n{4,}", "\n\n\n", "".join(keep))
    path.write_text(new, encoding="utf-8")


# --------------------------------------------------------------------------------------------- rewriting

class Rewriter:
    def __init__(self, table: dict[str, str], known: set[str]) -> None:
        self.table = table
        self.inner_comments: list[str] = []  # multi-line imports with comments inside (lost if rewritten)
        self.known = known  # every old dotted module name (to tell a module from an attribute)
        olds = sorted({*table, *(f"{m}.{n}" for m, n in SYMBOLS)}, key=len, reverse=True)
        self.dotted = re.compile(r"(?<![\w.])(" + "|".join(re.escape(o) for o in olds) + r")(?![\w])")
        paths = {}
        for old, new in table.items():
            is_pkg = old == P
            paths[mod_path(old, is_pkg)] = mod_path(new, is_pkg)
            if is_pkg:
                paths[old.replace(".", "/") + "/"] = new.replace(".", "/") + "/"
        self.paths = paths
        self.path_re = re.compile(r"(?<![\w/.])(" + "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
                                  + r")")

    def text(self, s: str) -> str:
        s = self.dotted.sub(lambda m: new_name(m.group(1), self.table), s)
        return self.path_re.sub(lambda m: self.paths[m.group(1)], s)

    # ---- imports
    def _abs(self, node: ast.ImportFrom, package: str) -> str:
        if not node.level:
            return node.module or ""
        parts = package.split(".")
        base = parts[: len(parts) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def _target(self, base: str, name: str) -> tuple[str, str]:
        """(new module to import from, new name) for ``from base import name``."""
        full = f"{base}.{name}"
        if full in self.known and full in self.table:  # a module imported as a name
            new = self.table[full]
            mod, _, last = new.rpartition(".")
            return mod, last
        if (base, name) in SYMBOLS:
            return SYMBOLS[(base, name)], name
        return new_name(base, self.table), name

    def import_from(self, node: ast.ImportFrom, old_package: str, new_package: str, src: str, indent: str) -> str | None:
        base = self._abs(node, old_package)
        if base.split(".")[0] not in ("pipeline", "verify"):
            return None
        groups: dict[str, list[str]] = {}
        changed = False
        for a in node.names:
            mod, name = self._target(base, a.name)
            alias = a.asname or (a.name if name != a.name else None)
            if mod != base or name != a.name:
                changed = True
            # ``x as x`` (an explicit re-export) stays
            groups.setdefault(mod, []).append(f"{name} as {alias}" if alias and (alias != name or a.asname) else name)
        if node.level:
            # a relative import that resolves to the same new modules from the file's new place stays as written
            rel_new = self._abs(node, new_package)
            same = all(self._target(base, a.name) == (rel_new, a.name) for a in node.names)
            if same:
                return None
            changed = True
        if not changed:
            return None
        comment = ""
        m = re.search(r"(\s+#.*)$", src.splitlines()[-1])
        if m:
            comment = m.group(1)
        out = []
        for mod, names in groups.items():
            out.append(f"from {mod} import {', '.join(names)}")
        return ("\n" + indent).join(out) + comment

    def import_(self, node: ast.Import, src: str, indent: str) -> str | None:
        changed = False
        parts = []
        for a in node.names:
            new = new_name(a.name, self.table) if a.name.split(".")[0] in ("pipeline", "verify") else a.name
            if new != a.name:
                changed = True
            parts.append(f"import {new}" + (f" as {a.asname}" if a.asname else ""))
        if not changed:
            return None
        m = re.search(r"(\s+#.*)$", src.splitlines()[-1])
        return ("\n" + indent).join(parts) + (m.group(1) if m else "")

    def file(self, path: Path, old_module: str, new_module: str) -> bool:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            die(f"{path}: cannot parse: {e}")
        is_pkg = path.name == "__init__.py"
        old_pkg = old_module if is_pkg else old_module.rpartition(".")[0]
        new_pkg = new_module if is_pkg else new_module.rpartition(".")[0]
        lines = text.splitlines(keepends=True)
        offs = [0]
        for ln in lines:
            offs.append(offs[-1] + len(ln))
        edits: list[tuple[int, int, str | None]] = []  # (start, end, replacement or None = keep as is)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            start = offs[node.lineno - 1] + node.col_offset
            end = offs[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
            # take a trailing comment on the last line along (it is kept after the rewritten statement)
            eol = text.find("\n", end)
            eol = len(text) if eol < 0 else eol
            tail = text[end:eol]
            if tail.strip().startswith("#"):
                end = eol
            src = text[start:end]
            indent = " " * node.col_offset
            if isinstance(node, ast.ImportFrom):
                rep = self.import_from(node, old_pkg, new_pkg, src, indent)
            else:
                rep = self.import_(node, src, indent)
            if rep is not None and any("#" in ln for ln in src.splitlines()[:-1]):
                self.inner_comments.append(f"{path}:{node.lineno}")
            edits.append((start, end, rep))
        edits.sort()
        out, pos = [], 0
        for start, end, rep in edits:
            out.append(self.text(text[pos:start]))
            out.append(text[start:end] if rep is None else rep)
            pos = end
        out.append(self.text(text[pos:]))
        new = "".join(out)
        if path.as_posix().endswith(EXPORT_COMMON):
            new = re.sub(r'REPO_SRC / "verify" / "(\w+)\.py"',
                         lambda m: (f'REPO_SRC / "pipeline" / "runtime" / "{m.group(1)}.py"'
                                    if f"verify.{m.group(1)}" in self.table else m.group(0)), new)
        if new != text:
            path.write_text(new, encoding="utf-8")
            return True
        return False


# --------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=".", help="repo root (default: .)")
    ap.add_argument("--dry-run", action="store_true", help="check the table against the tree, change nothing")
    ap.add_argument("--place", action="append", default=[], metavar="OLD=NEW",
                    help="place a module the table does not know (NEW empty: it stays)")
    ap.add_argument("--ruff", default=None, help="ruff executable (default: ROOT/.venv/bin/ruff, else ruff)")
    ap.add_argument("--allow-dirty", action="store_true")
    ap.add_argument("--no-protocol", action="store_true", help="skip step 6 (the LLM client protocol)")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    if not (root / "pipeline" / "stages").is_dir():
        die(f"{root}: not an envfoundry checkout (no pipeline/stages)")
    if (root / "pipeline" / "dbmodel").exists():
        die(f"{root}: pipeline/dbmodel exists: already moved?")
    if not args.allow_dirty and git(root, "status", "--porcelain", "--untracked-files=no").strip():
        die("the work tree has uncommitted changes (commit them first, or --allow-dirty)")
    table_all = dict(MODULES)
    for p in args.place:
        old, _, new = p.partition("=")
        table_all[old.strip()] = new.strip() or None

    mods = tracked_modules(root)
    unknown = sorted(m for m in mods if m.startswith(MUST_BE_MAPPED) and m not in table_all)
    missing = sorted(m for m in table_all if table_all[m] and m not in mods)
    if unknown:
        print("house_move: UNKNOWN MODULES (new since the table was written): place each with --place OLD=NEW "
              "(or OLD= to leave it), after reading its imports:", file=sys.stderr)
        for m in unknown:
            print(f"    {m}   ({mods[m]})", file=sys.stderr)
        sys.exit(3)
    if missing:
        print("house_move: WARNING: in the table but not in the tree (removed or renamed since): "
              + ", ".join(missing), file=sys.stderr)
    table = {o: n for o, n in table_all.items() if n and o in mods}
    for ex in EXTRACT:
        if ex.source not in mods:
            die(f"EXTRACT source {ex.source} is not in the tree")
    if args.dry_run:
        print(f"house_move: dry run: {len(table)} modules to move, {len(EXTRACT)} extraction(s); table covers the tree")
        return

    # 1. moves
    old_of_path: dict[str, str] = {rel: m for m, rel in mods.items()}
    moved: dict[str, str] = {}  # new rel path -> old module
    for old, new in sorted(table.items()):
        src = mods[old]
        dst = mod_path(new, src.endswith("__init__.py"))
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        git(root, "mv", src, dst)
        moved[dst] = old
        del old_of_path[src]
    for rel, old in moved.items():
        old_of_path[rel] = old
    # new packages need an __init__.py
    for new in sorted(set(table.values())):
        parts = new.split(".")
        for i in range(2, len(parts)):
            pkg = ".".join(parts[:i])
            init = root / mod_path(pkg, True)
            if not init.exists():
                doc = PACKAGE_DOCS.get(pkg)
                if doc is None:
                    print(f"house_move: WARNING: new package {pkg} has no docstring in PACKAGE_DOCS", file=sys.stderr)
                init.write_text(f'"""{doc}\n"""\n' if doc else "", encoding="utf-8")
                git(root, "add", str(init.relative_to(root)))
                old_of_path[str(init.relative_to(root))] = pkg
    # 2. extraction (after the moves: paths are the new ones, names the old ones)
    for ex in EXTRACT:
        src_rel = mod_path(table.get(ex.source, ex.source), False)
        dest_rel = mod_path(ex.dest, False)
        extract(root, ex, src_rel, dest_rel)
        git(root, "add", dest_rel)
        old_of_path[dest_rel] = ex.dest  # its relative imports (none expected) resolve from its own place

    # 3. rewrite
    rw = Rewriter(table, set(mods))
    touched = []
    for top in REWRITE_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if "/.venv/" in f"/{rel}" or "__pycache__" in rel:
                continue
            new_mod = module_of(rel)
            old_mod = old_of_path.get(rel, new_mod)
            if rw.file(path, old_mod, new_mod):
                touched.append(rel)
    # 6. the LLM client protocol
    if args.no_protocol:
        pass
    elif (root / PROTOCOL_PATH).exists():
        print(f"house_move: WARNING: {PROTOCOL_PATH} exists: the protocol step is skipped", file=sys.stderr)
    else:
        (root / PROTOCOL_PATH).write_text(PROTOCOL_SOURCE, encoding="utf-8")
        git(root, "add", PROTOCOL_PATH)
        typed = 0
        for top in PROTOCOL_DIRS:
            for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else [root / top]:
                text = path.read_text(encoding="utf-8")
                new, n = CLIENT_ANY.subn("client: LLMClientProtocol", text)
                if not n:
                    continue
                typed += n
                tree = ast.parse(new)
                last = max(node.end_lineno or 0 for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))
                lines = new.splitlines(keepends=True)
                lines.insert(last, PROTOCOL_IMPORT + "\n")
                path.write_text("".join(lines), encoding="utf-8")
                rel = path.relative_to(root).as_posix()
                if rel not in touched:
                    touched.append(rel)
        touched.append(PROTOCOL_PATH)
        print(f"house_move: typed {typed} stage parameters `client: Any` as LLMClientProtocol")
    if rw.inner_comments:
        print("house_move: WARNING: rewritten multi-line imports had comments inside (lost; check): "
              + ", ".join(rw.inner_comments), file=sys.stderr)
    # 4. layers
    layers = root / "tests" / "test_layers.py"
    t = layers.read_text(encoding="utf-8")
    if LAYERS_OLD not in t or LAYERS_RUNTIME_OLD not in t:
        print("house_move: WARNING: tests/test_layers.py LAYERS changed since the script was written: add "
              "'pipeline.dbmodel' above runtime and 'pipeline.scenarios' above stages by hand", file=sys.stderr)
    else:
        t = t.replace(LAYERS_OLD, LAYERS_NEW).replace(LAYERS_RUNTIME_OLD, LAYERS_RUNTIME_NEW)
        t = t.replace("cli -> run -> executor -> graph -> stages -> envdir / catalog -> verify -> runtime ->",
                      "cli -> run -> executor -> graph -> scenarios -> stages -> envdir / catalog -> verify -> dbmodel "
                      "-> runtime ->")
        layers.write_text(t, encoding="utf-8")
        touched.append("tests/test_layers.py")
    # 5. ruff: import order after renames, imports an extraction left unused
    ruff = args.ruff or (str(root / ".venv/bin/ruff") if (root / ".venv/bin/ruff").exists() else "ruff")
    fix = sorted(set(touched) | {mod_path(ex.dest, False) for ex in EXTRACT}
                 | {mod_path(table.get(ex.source, ex.source), False) for ex in EXTRACT})
    r = subprocess.run([ruff, "check", "--no-cache", "--fix", "--select", "I001,F401", *fix], cwd=root,
                       capture_output=True, text=True)
    if r.returncode:
        print(f"house_move: WARNING: ruff --fix left findings:\n{r.stdout}{r.stderr}", file=sys.stderr)
    r = subprocess.run([ruff, "check", "--no-cache", "--select", "F821,F811", *fix], cwd=root, capture_output=True,
                       text=True)
    failed = r.returncode != 0
    if failed:
        print(f"house_move: ERROR: undefined names after the move (an extraction needs a name it left behind?):\n"
              f"{r.stdout}", file=sys.stderr)
    git(root, "add", "--", *fix)  # moves and new files are staged already; the lead commits what is staged
    print(f"house_move: moved {len(table)} modules, extracted {sum(len(e.names) for e in EXTRACT)} names, "
          f"rewrote {len(touched)} files; all staged (git status; then git commit)")
    report_cross_stage(root)
    if failed:
        sys.exit(1)


def report_cross_stage(root: Path) -> None:
    """Imports from one stage package into another (what the move could not untangle mechanically)."""
    stages = root / "pipeline" / "stages"
    found = []
    for path in sorted(stages.rglob("*.py")):
        rel = path.relative_to(root)
        parts = rel.parts
        if len(parts) < 4:  # base.py, feedback.py
            continue
        mine = parts[2]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeline.stages."):
                theirs = node.module.split(".")[2]
                if theirs not in (mine, "base", "feedback"):
                    names = ", ".join(a.name for a in node.names)
                    found.append(f"    {rel}:{node.lineno}: {mine} <- {node.module} ({names})")
    if found:
        print(f"house_move: {len(found)} cross-stage imports remain (not mechanical: move the names to "
              "pipeline/dbmodel or split the module):")
        print("\n".join(found))


if __name__ == "__main__":
    main()
