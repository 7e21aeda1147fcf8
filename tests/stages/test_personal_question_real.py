"""The schema stage's yes/no question (``pipeline.stages.schema.personal.ask_personal``, setting
``personal_question``) with the real embedded model, on the columns MiniLM cannot read: German, Spanish and French
names of characteristics beside the ordinary columns of the same patients.

NOT RUN YET (2026-11-28): written while the lead held the model for a regeneration; the setting stays off until
this passes. What it decides: whether the 1.5B model says yes for the characteristics and, above all, no for the
ordinary columns (a false drop of a date of birth or an address costs more than a miss), so the setting may be
turned on for schemas in other languages."""

from __future__ import annotations

import pytest

from pipeline.dbmodel.columns import Column
from pipeline.stages.schema.personal import ask_personal


def _col(name: str, enum: tuple[str, ...] | None = None) -> Column:
    return Column(name=name, type="TEXT", notnull=False, pk=0, has_default=False, enum=enum, ref=None)


PERSONAL = [("patienten", _col("geschlecht", ("männlich", "weiblich"))), ("patienten", _col("familienstand")),
            ("pacientes", _col("nacionalidad")), ("pacientes", _col("estado_civil")), ("patients", _col("sexe")),
            ("patients", _col("religion"))]
ORDINARY = [("patienten", _col("geburtsdatum")), ("patienten", _col("adresse")), ("patienten", _col("allergien")),
            ("pacientes", _col("nombre")), ("pacientes", _col("fecha_nacimiento")), ("pacientes", _col("edad")),
            ("patients", _col("telephone")), ("patients", _col("statut", ("actif", "suspendu")))]


@pytest.mark.real_llm
def test_real_model_answers_the_yes_no_question_on_names_minilm_cannot_read(real_llm) -> None:
    yes, notes = ask_personal(real_llm, PERSONAL + ORDINARY)
    said = {(t, c) for t, cols in yes.items() for c in cols}
    caught = [(t, c.name) for t, c in PERSONAL if (t, c.name) in said]
    false = [(t, c.name) for t, c in ORDINARY if (t, c.name) in said]
    print(f"\ncaught {len(caught)}/{len(PERSONAL)}: {caught}\nfalse drops {len(false)}/{len(ORDINARY)}: {false}"
          f"\nnotes: {[n.reason for n in notes]}")
    assert not notes  # every answer usable
    assert not false  # conservative: no ordinary column of a person dropped
    assert len(caught) >= 4  # most characteristics caught where MiniLM caught one of these six (religion)
