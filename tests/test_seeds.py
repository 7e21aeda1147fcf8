"""Seed files: every accepted format, every bad-file case (file + line in the message), duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.seeds import (
    Seed,
    SeedFileError,
    duplicate_groups,
    exact_duplicates,
    load_many,
    load_seeds,
    near_duplicates,
    normalise,
)

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


def test_text_format_names_descriptions_comments_and_blank_lines(tmp_path: Path) -> None:
    p = write(tmp_path, "s.txt", "# a comment\n\nHotel booking\n  CRM:  sales   pipeline  \n"
                                "C# course platform\n# another\nERP: order to cash: invoices and payments\n")
    seeds = load_seeds(p)
    assert [(s.name, s.description, s.line) for s in seeds] == [
        ("Hotel booking", "", 3),
        ("CRM", "sales pipeline", 4),
        ("C# course platform", "", 5),
        ("ERP", "order to cash: invoices and payments", 7),
    ]
    assert all(s.source == str(p) for s in seeds)
    assert seeds[1].text == "CRM: sales pipeline" and seeds[0].text == "Hotel booking"


def test_a_long_head_before_a_colon_is_not_taken_as_a_name(tmp_path: Path) -> None:
    head = "A very long seed sentence that keeps going well past what anybody would call a name"
    seeds = load_seeds(write(tmp_path, "s.txt", f"{head}: note\n"))
    assert seeds[0].name == f"{head}: note" and seeds[0].description == ""


def test_jsonl_by_extension_and_by_content(tmp_path: Path) -> None:
    body = '{"name": "Hotel booking", "description": "rooms and stays"}\n\n# comment\n{"name": "Payroll"}\n'
    for name in ("s.jsonl", "s.txt"):
        seeds = load_seeds(write(tmp_path, name, body))
        assert [(s.name, s.description, s.line) for s in seeds] == [
            ("Hotel booking", "rooms and stays", 1), ("Payroll", "", 4)]


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    seeds = load_seeds(write(tmp_path, "s.txt", b"\xef\xbb\xbfCaf\xc3\xa9 orders: menus\r\nBakery\r\n"))
    assert [(s.name, s.description) for s in seeds] == [("Café orders", "menus"), ("Bakery", "")]


def test_seed_is_frozen() -> None:
    s = Seed(name="x", source="f", line=1)
    with pytest.raises(ValidationError):
        s.name = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "content", "line", "fragment"),
    [
        ("empty.txt", "", None, "no seeds"),
        ("comments.txt", "# only\n\n   \n# comments\n", None, "no seeds"),
        ("binary.txt", b"Hotel booking\nPay\x00roll\n", 2, "binary"),
        ("latin1.txt", b"Hotel\nCaf\xe9\n", 2, "not valid UTF-8"),
        ("bad.jsonl", '{"name": "a"}\n\n{"name": "b",\n', 3, "malformed JSON"),
        ("list.jsonl", '{"name": "a"}\n["b"]\n', 2, "expected a JSON object"),
        ("noname.jsonl", '{"description": "x"}\n', 1, "'name' is missing"),
        ("badkey.jsonl", '{"name": "a", "desc": "x"}\n', 1, "unknown key"),
        ("baddesc.jsonl", '{"name": "a", "description": 3}\n', 1, "'description' is not a string"),
        ("emptyname.txt", "Hotel\n: only a description\n", 2, "empty seed name"),
        ("emptyjson.jsonl", "{\"name\": \"  \"}\n", 1, "empty seed name"),
        ("json_in_text.txt", 'Hotel\n{"name": "x"}\n', 2, "looks like JSON"),
        ("long.txt", "ok\n" + "x" * 200 + "\n", 2, "at most 120"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path: Path, name: str, content: str | bytes, line: int | None,
                                      fragment: str) -> None:
    p = write(tmp_path, name, content)
    with pytest.raises(SeedFileError) as ei:
        load_seeds(p)
    err = ei.value
    assert err.path == str(p) and err.line == line
    where = f"{p}:{line}:" if line is not None else f"{p}:"
    assert str(err).startswith(where), str(err)
    assert fragment in str(err)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(SeedFileError, match="seed file not found") as ei:
        load_seeds(tmp_path / "nope.txt")
    assert str(tmp_path / "nope.txt") in str(ei.value)
    with pytest.raises(SeedFileError, match="not a regular file"):
        load_seeds(tmp_path)


def test_exact_duplicates_ignore_case_accents_and_punctuation(tmp_path: Path) -> None:
    p = write(tmp_path, "s.txt", "Café booking\nHotel booking\ncafe  BOOKING!: other words\nPayroll\n")
    dups = exact_duplicates(load_seeds(p))
    assert [(d.first.line, d.second.line, d.kind) for d in dups] == [(1, 3, "exact")]
    assert normalise("Café  BOOKING!") == "cafe booking"


def test_duplicate_groups_one_per_name_in_first_line_order(tmp_path: Path) -> None:
    p = write(tmp_path, "s.txt", "B\nA\nb\nC\na\nB!\n")
    groups = duplicate_groups(load_seeds(p))
    assert [(g.first.line, [s.line for s in g.repeats]) for g in groups] == [(1, [3, 6]), (2, [5])]
    assert groups[0].describe() == f"{p}:3: exact duplicate of line 1 ('B'); 2 repeats on lines 3, 6"
    assert groups[1].describe() == f"{p}:5: exact duplicate of line 2 ('A')"
    assert [(d.first.line, d.second.line) for d in exact_duplicates(load_seeds(p))] == [(1, 3), (1, 6), (2, 5)]


class _Axis:
    """A stand-in embedder with known geometry: seed "x<k>" points at angle k degrees in a plane."""

    def encode(self, texts: list[str]) -> object:
        import numpy as np

        angles = np.radians([float(t.split(":")[0][1:]) for t in texts])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)


def test_near_duplicates_keeps_the_most_similar_pairs_and_counts_all(tmp_path: Path, monkeypatch) -> None:
    import pipeline.seeds as seeds_mod

    monkeypatch.setattr(seeds_mod, "_BLOCK", 7)  # several blocks of the similarity matrix
    names = ["x0", "x1", "x3", "x30", "x31", "x90", "x0: same name, other words"] + [f"x{a}" for a in range(100, 160, 2)]
    p = write(tmp_path, "s.txt", "\n".join(names) + "\n")
    seeds = load_seeds(p)
    near = near_duplicates(seeds, _Axis(), threshold=0.99, limit=3)
    import math

    expected = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names)) if i != 6 and j != 6
                and math.cos(math.radians(float(names[i][1:]) - float(names[j][1:]))) >= 0.99]
    assert near.total == len(expected)  # the repeated name (line 7) is left to the exact check
    assert [(d.first.line, d.second.line) for d in near.pairs] == [(1, 2), (4, 5), (2, 3)]
    assert [d.similarity for d in near.pairs] == sorted((d.similarity for d in near.pairs), reverse=True)
    assert near_duplicates(seeds[:1], _Axis(), 0.5).total == 0


def test_load_many_keeps_file_order(tmp_path: Path) -> None:
    a = write(tmp_path, "a.txt", "One\nTwo\n")
    b = write(tmp_path, "b.jsonl", '{"name": "Three"}\n')
    assert [(s.name, Path(s.source).name) for s in load_many([a, b])] == [
        ("One", "a.txt"), ("Two", "a.txt"), ("Three", "b.jsonl")]


def test_shipped_seed_files() -> None:
    seeds = load_seeds(REPO / "seeds" / "domains.txt")
    assert len(seeds) >= 100
    assert not exact_duplicates(seeds)
    names = " ".join(s.name for s in seeds)
    for word in ("CRM", "ERP", "HR", "Procurement", "ticketing", "Accounts", "Hospital", "Freight", "Law",
                 "School", "permit", "Library"):
        assert word in names, word
    quick = load_seeds(REPO / "seeds" / "quickstart.txt")
    assert 1 <= len(quick) <= 2 and "library" in quick[0].name.lower()
