"""Which of a scenario's goals the write tools serve, by MiniLM similarity (``pipeline.embed``), in any language.

A goal ("renew a loan") is matched with the write tools' texts (the tool's name as words and its description or
planned purpose) and with the tables' texts (the table's name and its columns' names as words). No word list and no
column-name rule: only the cosine similarity of the texts, one goal per write tool.

*One goal per write tool* (greedy, highest similarity first, ties by order): the tools prompt asks for "every write
goal its own write tool", and a tool that only shares the goal's noun would otherwise serve every goal about that
noun ("add_book" for borrowing, returning and holding a book alike).

Measured (2026-11-28, all-MiniLM-L6-v2, the library of the example regenerated with meaning-next's code,
``book_lending_system_01992f8b23``, goals borrow a book / return a book / renew a loan / pay overdue fine / place a
hold on a book):

- against its two write tools ("add book: Add a new book to the library.", "create loans: Record a new loan; returns
  it as recorded."): borrow 0.562 add_book, 0.376 create_loans; return 0.526 add_book; renew 0.560 create_loans;
  pay overdue fine 0.097 at most; place a hold 0.521 add_book. Every one of these is a wrong pair or a noun-only
  pair: none of the five goals is served (creating a loan would serve borrowing, but its text is about the record,
  0.376), and all stay below :data:`COVER`.
- against tools that do serve them, written as the model writes tools ("borrow book: Lend a book to a member;
  records a loan.", "return book: Mark a loan as returned.", "renew loan: Extend a loan's due date and record a
  renewal.", "pay fine: Mark an overdue fine as paid.", "place hold: Put a hold on a book for a member."): the right
  pairs 0.707-0.887, the best wrong pair 0.528 (return vs borrow book).
- the tests' library plan (tests/stages/library_replies.py, name and purpose): "Lend a book to a member" 0.644
  with "lend book: Create an open loan if a copy is available", "Return a borrowed book" 0.711 with "return book:
  Mark an open loan returned and put the copy back", "Pay an overdue fine" 0.179 at most, "Renew a loan" 0.475,
  "Place a hold on a book" 0.433; "Pay an overdue fine" 0.710 with "pay fine: Record that a member paid the
  overdue fine of a loan".
- the pharmacy (``community_pharmacy_prescription_manageme_3ea0eda51f``; writes add_prescription, add_event):
  "Fill prescriptions" 0.635 add_prescription ("Add a new prescription to the database": adding is not filling),
  "Record medication details" 0.521, "Enter patient information" 0.450; none served.
- against the tables' texts ("renewals: renewal id, loan id, renewal date"): renew 0.669 renewals, pay overdue fine
  0.715 overdue_fines; borrow 0.388 books and 0.382 loans, return 0.476 books, place a hold 0.432 books (there is no
  holds table); pharmacy 0.543-0.593; the tests' library: hold 0.523 books, pay a fine 0.181 loans. A table's text does not separate "a table could record it" (borrow: loans)
  from "no table does" (hold) below about 0.5, so :data:`RESEMBLE` only words a note; it does not decide whether a
  goal is fed back (the tool writer and the schema amendments judge that on real SQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.meaning.assign import Encode, default_encode, one_to_one, similarities

COVER = 0.6
"""Similarity a goal needs with a write tool's text to be served by it: right pairs 0.644-0.887, wrong and noun-only
pairs at most 0.562 (see the module's measurements); the pharmacy's "Fill prescriptions" with "add prescription"
(0.635), which adds a prescription rather than filling one, counts as served: the margin is thin there."""

RESEMBLE = 0.5
"""Similarity with a table's text below which a note says that no table resembles the goal (renewals 0.669 and
overdue fines 0.715 for their goals; the library's goals without a table of their own 0.388-0.476)."""

KEEP = 0.69
"""Similarity an intent needs with a scenario goal to say it again (the intents stage): the library's goals with
paraphrases ("Lend a book to a member" for "borrow a book", "Record the return of a borrowed book", "Renew a
member's loan", "Pay an overdue fine", "Put a book on hold for a member") 0.698-0.987; with the intents the model
wrote instead (find a book, list all books, add a new book, change the status of a book, cancel a loan, place a
hold on a book) 0.676 at most for a different goal ("renew a loan" with "cancel a loan"; "borrow a book" with "find
a book" 0.666), 1.0 for the one it kept. A thin margin: a paraphrase below it costs one more intents call, a
different goal above it leaves the goal unasked for, as before."""

@dataclass(frozen=True)
class GoalMatch:
    goal: str
    tool: str | None
    """The write tool that serves the goal (one goal per tool), or None."""
    nearest: str | None
    """The write tool whose text is nearest to the goal (assigned or not), None without write tools."""
    score: float
    """The goal's similarity with ``nearest``."""
    table: str | None
    """The table whose text is nearest to the goal."""
    table_score: float

    @property
    def covered(self) -> bool:
        return self.tool is not None

    @property
    def resembles_a_table(self) -> bool:
        return self.table is not None and self.table_score >= RESEMBLE


def words(identifier: str) -> str:
    """An identifier as words: its ``_`` separators as spaces (the identifier's own words, in its language)."""
    return " ".join(identifier.replace("_", " ").split())


def tool_text(name: str, description: str) -> str:
    return f"{words(name)}: {description.strip()}"


def table_text(name: str, columns: Sequence[str]) -> str:
    return f"{words(name)}: {', '.join(words(c) for c in columns)}"


def missing_goals(goals: Sequence[str], stated: Sequence[str], encode: Encode = default_encode,
                  keep: float = KEEP) -> list[str]:
    """The goals that none of ``stated`` (the intents stage's goals, in the model's words) says again: one goal per
    stated text, greedily by MiniLM similarity, pairs below ``keep`` left out."""
    goals = list(dict.fromkeys(g for g in goals if g.strip()))
    assigned = one_to_one(similarities(encode, goals, list(stated)), keep)
    return [g for i, g in enumerate(goals) if i not in assigned]


def match_goals(goals: Sequence[str], tools: Sequence[tuple[str, str]], tables: Sequence[tuple[str, Sequence[str]]],
                encode: Encode = default_encode, cover: float = COVER) -> list[GoalMatch]:
    """Each goal with the write tool that serves it (``tools``: (name, description or purpose)), one goal per tool,
    greedily by similarity (rounded to 4 places, ties broken by order, so the same texts give the same matches), and
    with its nearest table (``tables``: (name, column names))."""
    goals = list(dict.fromkeys(g for g in goals if g.strip()))
    by_tool = similarities(encode, goals, [tool_text(n, d) for n, d in tools])
    by_table = similarities(encode, goals, [table_text(n, cols) for n, cols in tables])
    assigned = one_to_one(by_tool, cover)
    out = []
    for i, goal in enumerate(goals):
        near = assigned.get(i, max(range(len(tools)), key=lambda j: (by_tool[i][j], -j))) if tools else None
        tnear = max(range(len(tables)), key=lambda j: (by_table[i][j], -j)) if tables else None
        out.append(GoalMatch(
            goal=goal, tool=tools[assigned[i]][0] if i in assigned else None,
            nearest=tools[near][0] if near is not None else None,
            score=by_tool[i][near] if near is not None else 0.0,
            table=tables[tnear][0] if tnear is not None else None,
            table_score=by_table[i][tnear] if tnear is not None else 0.0))
    return out
