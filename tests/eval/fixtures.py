"""Task sets for eval tests: the hand-written fixture environments as a small catalog on disk.

* the library (tests/fixtures/library.py): its two hand-written tasks, tasks derived from reference
  solutions (writes, a question), and questions with typed answers (number, text with sibling
  candidates, date, boolean) as the reward module reads them;
* the shop (tests/verify/envs.py): a two-call task whose second call uses the first call's new id
  (``"$1.id"``), and a question.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.envdir import write_env_dir
from pipeline.eval import EvalItem, task_hash
from pipeline.ir import Environment, Task, ToolCall
from tests.fixtures.library import library_env, library_tasks
from tests.verify.envs import shop_env
from verify.derive import COUNT, derive_verifier

T = ToolCall


def derived(env: Environment, instruction: str, calls: list[ToolCall], answer_field: str | None = None,
            kind: str = "multi_step", typed: dict[str, Any] | None = None) -> Task:
    """A task whose verifier is derived from ``calls`` (kept as written, ``"$N.field"`` references included)."""
    d = derive_verifier(env, calls, answer_field=answer_field)
    assert d.verifier is not None, d.error
    verifier = d.verifier
    if typed is not None:  # a typed answer (the reward module's format) in place of the plain string
        verifier = verifier.model_copy(update={"answer": typed})
    return Task(
        task_id=Task.make_id(env.env_id, instruction, calls, d.verifier), env_id=env.env_id, instruction=instruction,
        tools=[t.openai_schema() for t in env.tools], reference_solution=calls, verifier=verifier, kind=kind,
        metadata={"tier": 1 if len(calls) == 1 else 2},
        provenance={"source": "tests/eval/fixtures.py"})


def library_set() -> tuple[Environment, list[Task]]:
    env = library_env()
    tasks = list(library_tasks(env))
    tasks += [
        derived(env, "Matilda came back today. Record the return.", [T(tool="return_book", arguments={"book_id": 4})],
                kind="update"),
        derived(env, "Remove member Bob Stone.", [T(tool="delete_member", arguments={"member_id": 2})], kind="delete"),
        derived(env, "What is the email address of Dan Wu?",
                [T(tool="find_member_by_name", arguments={"name": "Dan Wu"})], "email", kind="lookup"),
        derived(env, "How many books by Jane Austen does the library have?",
                [T(tool="search_books", arguments={"query": "Jane Austen"})], COUNT, kind="lookup",
                typed={"type": "number", "value": 2}),
        derived(env, "In which year was Matilda published?", [T(tool="search_books", arguments={"query": "Matilda"})],
                "year", kind="lookup", typed={"type": "number", "value": 1988}),
        derived(env, "Which Jane Austen novel in the library came out in 1817?",
                [T(tool="search_books", arguments={"query": "Jane Austen"})], "title", kind="lookup",
                typed={"type": "text", "value": "Persuasion", "others": ["Emma"], "stated": ["Jane Austen", "1817"]}),
        derived(env, "When is Carla Diaz's loan of Matilda due?",
                [T(tool="find_member_by_name", arguments={"name": "Carla"}),
                 T(tool="list_loans_for_member", arguments={"member_id": 3, "status": "open"})], "due_date",
                kind="lookup", typed={"type": "date", "value": "2026-01-19"}),
        derived(env, "Is Emma on loan right now?", [T(tool="get_book", arguments={"book_id": 1})], "on_loan",
                kind="lookup", typed={"type": "boolean", "value": False}),
        derived(env, "Is Matilda on loan right now?", [T(tool="get_book", arguments={"book_id": 4})], "on_loan",
                kind="lookup", typed={"type": "boolean", "value": True}),
    ]
    return env, tasks


def shop_set() -> tuple[Environment, list[Task]]:
    env = shop_env()
    tasks = [
        derived(env, "Open an order for Cy and add 3 INK to it.",
                [T(tool="create_order", arguments={"customer": "Cy"}),
                 T(tool="add_item", arguments={"order_id": "$1.id", "sku": "INK", "qty": 3})], kind="create"),
        derived(env, "What is the status of Ben's order?", [T(tool="get_order", arguments={"customer": "Ben"})],
                "status", kind="lookup", typed={"type": "enum", "value": "open", "others": ["shipped", "complete"]}),
    ]
    return env, tasks


def write_catalog(root: Path) -> Path:
    """The fixture environments with their tasks as a catalog directory on disk (``envs/*`` with tasks.jsonl)."""
    for name, (env, tasks) in (("library", library_set()), ("shop", shop_set())):
        write_env_dir(env, root / "envs" / name, tasks)
    return root


def items(tmp: Path) -> list[EvalItem]:
    """Every fixture task (typed answers included) as eval items, each env built from its IR."""
    out = []
    for env, tasks in (library_set(), shop_set()):
        out += [EvalItem(env, tmp / "no-env-dir", t, task_hash(t)) for t in tasks]
    return out


def questions(tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if t.verifier.answer is not None]
