"""A value made of another column's value in the same row (issue 40: an e-mail of the person's name), inferred from
the example values alone: the source's words, case folded and without accents where the examples write them so,
in any script whose words the examples write as they are."""

from __future__ import annotations

import pytest

from pipeline.meaning import relations


@pytest.mark.parametrize(("source", "made", "recipe", "tail"), [
    ("John Smith", "john.smith@example.com", "{0}.{-1}", "@example.com"),
    ("Jane Doe", "jdoe@corp.de", "{0:1}{-1}", "@corp.de"),
    ("José García", "jose.garcia42@correo.es", "{0}.{-1}", "42@correo.es"),
    ("Mary O'Brien", "mary.obrien@mail.ie", "{0}.{-1}", "@mail.ie"),
    ("John Smith", "smithj", "{-1}{0:1}", ""),
    ("Acme Corp", "info@acmecorp.com", "info@{0}{-1}", ".com"),
    ("山田 太郎", "山田.太郎@example.jp", "{0}.{-1}", "@example.jp"),
    ("Алексей Петров", "алексей_петров", "{0}_{-1}", ""),
])
def test_a_recipe_is_read_from_one_pair(source: str, made: str, recipe: str, tail: str) -> None:
    assert relations.recipe_of(source, made) == (recipe, tail)


@pytest.mark.parametrize(("source", "other"), [
    ("Al Green", "alice@example.com"),  # a word followed by more letters is another word
    ("John Smith", "John Smith"),  # a copy: nothing is made of it (derived_columns skips copies)
    ("Aspirin", "Aspirin is a pain reliever for mild pain"),  # a sentence: spaces after the word
    ("Angel Morgan", "knoxrebecca@gmail.com"),
    ("Leeds", "LS1 4AP"),
])
def test_no_recipe_where_the_value_is_not_made_of_the_other(source: str, other: str) -> None:
    got = relations.recipe_of(source, other)
    assert got is None or source == other


def test_derive_makes_the_value_of_any_row_by_the_recipe() -> None:
    assert relations.derive("{0}.{-1}", "Ana María López") == "ana.lopez"
    assert relations.derive("{0}.{-1}", "Madonna") == "madonna"  # one word: its separator left out
    assert relations.derive("{0:1}{-1}", "Émile Zola") == "ezola"
    assert relations.derive("info@{0}{-1}", "Blue Harbor") == "info@blueharbor"
    assert relations.derive("{0}.{-1}", "   ") is None


def test_derived_columns_need_every_example_and_one_recipe() -> None:
    examples = {"name": ["John Smith", "Jane Doe", "Bob Stone", None],
                "email": ["john.smith@example.com", "jane.doe@example.com", "bob.stone99@gmail.com", "x@y.z"],
                "city": ["Leeds", "York", "Hull", "Bath"],
                "login": ["jsmith", "jdoe", "bstone", "ghost"]}
    got = {d.column: d for d in relations.derived_columns(examples, list(examples))}
    assert set(got) == {"email", "login"}
    assert got["email"].source == "name" and got["email"].recipe == "{0}.{-1}"
    assert got["email"].tails == ("@example.com", "99@gmail.com")
    assert got["login"].source == "name" and got["login"].recipe == "{0:1}{-1}"
    # one row that does not follow the recipe: no relation (only when every example shows it)
    broken = {**examples, "email": ["john.smith@example.com", "doe.jane@example.com", "bob.stone@gmail.com", None]}
    assert "email" not in {d.column for d in relations.derived_columns(broken, list(broken))}
    # names and addresses drawn independently show nothing
    apart = {"name": ["Angel Morgan", "Lisa Park"], "email": ["knoxrebecca@gmail.com", "tom77@yahoo.com"]}
    assert relations.derived_columns(apart, ["name", "email"]) == []
    # one example is not enough
    assert relations.derived_columns({"name": ["John Smith"], "email": ["john.smith@x.com"]}, ["name", "email"]) == []


def test_a_derived_column_is_nobodys_source_and_the_widest_source_wins() -> None:
    examples = {"full": ["John Smith", "Jane Doe"], "first": ["John", "Jane"],
                "email": ["john.smith@corp.com", "jane.doe@corp.com"]}
    got = {d.column: d.source for d in relations.derived_columns(examples, list(examples))}
    assert got["email"] == "full"  # its words cover more of the address than the first name does
    assert "full" not in got


def test_reserved_example_domains() -> None:
    assert relations.reserved_domain("@example.com") and relations.reserved_domain("12@mail.example")
    assert relations.reserved_domain("@shop.test") and not relations.reserved_domain("@gmail.com")
    assert not relations.reserved_domain("") and not relations.reserved_domain(".com")
