"""Issue 40 with the real embedded model: the schema stage's question of which tables hold people
(``pipeline.stages.schema.personal.ask_people``) on two small schemas outside the example, an animal shelter
(pets, adopters, adoptions) and a riding stable (horses, riders, lessons). In each, MiniLM classifies the animals'
sex as well as the people's (it reads a column's name, not whose it is); the model names the people tables, so
the people's column is withheld and the animals' stays, with rules free to turn on it."""

from __future__ import annotations

import pytest

from pipeline import ir

SHELTER = [
    ir.Table(name="pets", ddl="CREATE TABLE pets (pet_id INTEGER PRIMARY KEY, name TEXT NOT NULL, species TEXT NOT "
             "NULL CHECK (species IN ('dog', 'cat', 'rabbit')), breed TEXT, gender TEXT NOT NULL CHECK (gender IN "
             "('male', 'female')), birth_date TEXT, status TEXT NOT NULL CHECK (status IN ('available', 'adopted'))) "
             "STRICT"),
    ir.Table(name="adopters", ddl="CREATE TABLE adopters (adopter_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL, "
             "email TEXT NOT NULL UNIQUE, phone TEXT, gender TEXT CHECK (gender IN ('male', 'female', 'other'))) "
             "STRICT"),
    ir.Table(name="adoptions", ddl="CREATE TABLE adoptions (adoption_id INTEGER PRIMARY KEY, pet_id INTEGER NOT NULL "
             "REFERENCES pets(pet_id), adopter_id INTEGER NOT NULL REFERENCES adopters(adopter_id), adoption_date "
             "TEXT NOT NULL, fee REAL NOT NULL CHECK (fee >= 0)) STRICT"),
]

STABLE = [
    ir.Table(name="horses", ddl="CREATE TABLE horses (horse_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, breed "
             "TEXT NOT NULL, sex TEXT NOT NULL CHECK (sex IN ('mare', 'gelding', 'stallion')), height_hands REAL NOT "
             "NULL, status TEXT NOT NULL CHECK (status IN ('active', 'resting'))) STRICT"),
    ir.Table(name="riders", ddl="CREATE TABLE riders (rider_id INTEGER PRIMARY KEY, name TEXT NOT NULL, phone TEXT NOT "
             "NULL UNIQUE, level TEXT NOT NULL CHECK (level IN ('beginner', 'intermediate', 'advanced')), gender "
             "TEXT) STRICT"),
    ir.Table(name="lessons", ddl="CREATE TABLE lessons (lesson_id INTEGER PRIMARY KEY, horse_id INTEGER NOT NULL "
             "REFERENCES horses(horse_id), rider_id INTEGER NOT NULL REFERENCES riders(rider_id), lesson_date TEXT "
             "NOT NULL, duration_minutes INTEGER NOT NULL CHECK (duration_minutes > 0)) STRICT"),
]


@pytest.mark.real_llm
@pytest.mark.parametrize(("tables", "animals", "people"), [(SHELTER, "pets.gender", "adopters.gender"),
                                                           (STABLE, "horses.sex", "riders.gender")],
                         ids=["shelter", "stable"])
def test_real_model_names_the_people_tables(real_llm, tables: list[ir.Table], animals: str, people: str) -> None:
    from pipeline.stages.schema.personal import NOT_PEOPLE, ask_people, withhold_personal
    from pipeline.stages.schema.tables import check_tables

    answers: list[dict[str, bool] | str] = []

    def ask(ts: list[ir.Table]) -> dict[str, bool] | str:
        answers.append(ask_people(real_llm, ts))
        return answers[-1]

    out, _, notes = withhold_personal(tables, {}, {}, check_tables, people=ask)
    print("\nanswer:", answers)
    (answer,) = answers  # one call per schema
    assert isinstance(answer, dict)
    animal_table, animal_col = animals.split(".")
    people_table, people_col = people.split(".")
    assert answer[people_table] is True and answer[animal_table] is False
    got = {t.name: t for t in out}
    assert (got[people_table].withheld, got[animal_table].withheld) == ([people_col], [])
    assert animal_col not in got[animal_table].personal and animal_col in got[animal_table].ddl
    assert {n.item: n.evidence.get("personal") for n in notes} == {animals: NOT_PEOPLE, people: "dropped"}
