"""A UNIQUE list continued past its first call by the real embedded model (issue 40), on a domain that appears
nowhere in the example catalog: a record shop's albums and their artists. The library's books (the committed
example, 2026-11-30) stopped at 11 titles after three calls: the second wrote back the rows it was shown and two
calls in a row adding fewer than three ended the list. Now every call after a low one samples with a seed of its
own and the list ends only after calls that add nothing, so later calls keep adding rows.

What must hold whatever the small model writes: the calls stay within the rounds given, no key repeats, no value is
its own row's other value; the capability under test is that the calls after the first add rows to the list (the
first call's rows are never enough: ``WANT`` is more than one call asks). Four calls at most (~20-40 s each)."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.meaning import vocab
from pipeline.settings import BuildSettings
from pipeline.stages.rows import generators as rowgen

SHOP = ir.Scenario(name="Vinyl record shop",
                   description="A record shop sells albums to its regular customers and keeps its stock of records.")
ALBUMS = ir.Table(name="albums", natural_key=["title"], ddl=(
    "CREATE TABLE albums (album_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, artist TEXT NOT NULL, "
    "price REAL NOT NULL) STRICT"))
SEEDS = [("Abbey Road", "The Beatles"), ("Rumours", "Fleetwood Mac"), ("Thriller", "Michael Jackson"),
         ("Blue", "Joni Mitchell")]
ROUNDS = 4
WANT = 3 * rowgen.TUPLE_ASK
"""More rows than one call asks: the list must be continued past its first call."""


@pytest.mark.real_llm
def test_later_calls_add_albums_to_a_unique_list(real_llm: object) -> None:
    replies: list[list[tuple[str, ...]]] = []
    got, calls = rowgen.continue_tuples(SHOP, ALBUMS, ["title", "artist"], SEEDS, WANT, ROUNDS, real_llm,  # type: ignore[arg-type]
                                        BuildSettings(), distinct=(0,), replies=replies)
    first = {vocab.norm(r[0]) for r in replies[0]} if replies else set()
    later = [r for r in got if vocab.norm(r[0]) not in first]
    print(f"\nalbums: {calls} calls, {len(got)} kept ({len(later)} from the calls after the first): {got}")
    assert 1 <= calls <= ROUNDS
    assert all(len(r) == 2 and all(r) and vocab.norm(r[0]) != vocab.norm(r[1]) for r in got), got
    keys = [vocab.norm(r[0]) for r in [*SEEDS, *got]]
    assert len(keys) == len(set(keys)), got
    assert later, (calls, replies)  # the list went on past its first call
