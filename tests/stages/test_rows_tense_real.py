"""Issue 40 with the real embedded model: the question of which side of the clock a row in each state is dated on
(``pipeline.stages.rows.tense.ask_tense``), on three domains' tables: the outside builds' laundry orders and dental
appointments (whose 'closed' orders and 'completed' visits were drawn after the clock), and a car repair shop's jobs.
A finished row's dates are in the past; a booked visit's are not."""

from __future__ import annotations

import pytest

from pipeline import ir

LAUNDRY = (ir.Scenario(name="Laundry Pickup", description="Customers schedule and pay for laundry pickups, view their "
                       "current orders and track the status of their deliveries."),
           ir.Table(name="orders", ddl="CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_name TEXT NOT "
                    "NULL, order_date TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'closed')), "
                    "delivery_date TEXT NOT NULL) STRICT"),
           "status", ["open", "closed"], ["order_date", "delivery_date"])
DENTAL = (ir.Scenario(name="Dental Appointments", description="Patients book cleanings; dentists manage chairs and "
                      "treatment plans."),
          ir.Table(name="appointments", ddl="CREATE TABLE appointments (appointment_id INTEGER PRIMARY KEY, "
                   "patient_id INTEGER NOT NULL, dentist_id INTEGER NOT NULL, start_date TEXT NOT NULL, end_date "
                   "TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'scheduled', 'completed'))) "
                   "STRICT"),
          "status", ["pending", "scheduled", "completed"], ["start_date", "end_date"])
REPAIRS = (ir.Scenario(name="Car repair shop", description="Customers bring cars in for repairs; mechanics work on "
                       "jobs and customers pick their cars up when the job is finished."),
           ir.Table(name="jobs", ddl="CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, plate TEXT NOT NULL, "
                    "dropped_off TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('booked', 'in_repair', "
                    "'finished'))) STRICT"),
           "state", ["booked", "in_repair", "finished"], ["dropped_off"])


@pytest.mark.real_llm
@pytest.mark.parametrize(("case", "past", "not_past"), [(LAUNDRY, "closed", None), (DENTAL, "completed", "scheduled"),
                                                         (REPAIRS, "finished", None)],
                         ids=["laundry", "dental", "repairs"])
def test_real_model_dates_finished_rows_in_the_past(real_llm, case: tuple, past: str, not_past: str | None) -> None:
    from pipeline.stages.rows.tense import ask_tense

    scenario, table, column, values, dates = case
    g = ir.ColumnGenerator(column=column, kind="enum", values=values)
    got = ask_tense(real_llm, scenario, table, g, dates)
    print("\nanswer:", got if isinstance(got, str) else got.sides)
    assert not isinstance(got, str)
    assert set(got.sides) == set(values)
    assert set(got.sides[past].values()) == {"before"}
    if not_past is not None:
        assert "before" not in set(got.sides[not_past].values())
