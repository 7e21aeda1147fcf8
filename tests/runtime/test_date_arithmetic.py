"""Arithmetic on a date/time value (``:today + 1``: SQLite reads '2026-01-15' as 2026) is found
(``sqlshape.date_arithmetic``) and refused by the static tool check, naming the tool, the step, the expression and
what to write instead; ``julianday(a) - julianday(b)`` and ``date(x, '+N days')`` stay allowed."""

from __future__ import annotations

import pytest

from pipeline.runtime import engine, static_checks
from pipeline.runtime.sqlshape import date_arithmetic, dated_outputs

DATED = {("loans", "due_date"), ("loans", "loan_date")}
CLOCK = ("now", "today")

# the dental environment of the o16b outside build (dental_appointments_53178c5f90): its add_cleaning tool stored
# end_date '2027' (SQLite: '2026-01-15' + 1 = 2027); its tables and two seeded appointments
DENTAL_DDL = [
    "CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK (age >= 0), "
    "cleaning_required TEXT) STRICT",
    "CREATE TABLE dentists (dentist_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, specialization TEXT NOT NULL "
    "CHECK (specialization IN ('general', 'periodontics', 'orthodontics')), availability TEXT NOT NULL CHECK "
    "(availability IN ('available', 'unavailable'))) STRICT",
    "CREATE TABLE appointments (appointment_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES "
    "patients(patient_id), dentist_id INTEGER NOT NULL REFERENCES dentists(dentist_id), start_date TEXT NOT NULL, "
    "end_date TEXT NOT NULL CHECK (end_date >= start_date), status TEXT NOT NULL CHECK (status IN ('pending', "
    "'scheduled', 'completed')), cleaning_required INTEGER DEFAULT FALSE) STRICT",
]
ADD_CLEANING = {
    "name": "add_cleaning", "description": "Create a new cleaning appointment.", "kind": "write",
    "params": [{"name": "patient_id", "type": "integer", "required": True},
               {"name": "dentist_id", "type": "integer", "required": True},
               {"name": "cleaning_required", "type": "boolean", "required": True}],
    "returns": {"mode": "one", "sql": "SELECT * FROM \"appointments\" WHERE \"appointment_id\" = :last_id"},
    "steps": [
        {"kind": "guard", "must": "exist", "error": "Patient {patient_id} does not exist",
         "sql": "SELECT 1 FROM patients WHERE patient_id = :patient_id"},
        {"kind": "guard", "must": "exist", "error": "Dentist {dentist_id} does not exist",
         "sql": "SELECT 1 FROM dentists WHERE dentist_id = :dentist_id"},
        {"kind": "write", "sql": "INSERT INTO appointments (patient_id, dentist_id, start_date, end_date, status, "
                                 "cleaning_required) VALUES (:patient_id, :dentist_id, :today, :today + 1, "
                                 "'pending', :cleaning_required)"},
        {"kind": "write", "sql": "UPDATE patients SET cleaning_required = TRUE WHERE patient_id = :patient_id"},
    ],
}


@pytest.fixture
def dental():
    c = engine.connect(":memory:")
    for ddl in DENTAL_DDL:
        c.execute(ddl)
    c.execute("INSERT INTO patients VALUES (1, 'Ana Ruiz', 34, NULL)")
    c.execute("INSERT INTO dentists VALUES (1, 'Dr. Okafor', 'general', 'available')")
    c.execute("INSERT INTO appointments VALUES (1, 1, 1, '2026-01-10', '2026-01-10', 'completed', 0), "
              "(2, 1, 1, '2026-01-20T10:30', '2026-01-20T11:00', 'scheduled', 1)")
    yield c
    c.close()


def test_the_dental_tool_is_refused_naming_step_expression_and_fix(dental):
    (problem,) = static_checks.check_tool(dental, ADD_CLEANING, static_checks.dated_columns(dental))
    assert problem.startswith("tool 'add_cleaning' step 3 (write): :today + 1 ")
    assert "date(:today, '+7 days')" in problem and "julianday(a) - julianday(b)" in problem


def test_the_dental_tool_is_refused_without_dated_columns(dental):
    # the clock placeholders are dates whatever the rows hold
    assert len(static_checks.check_tool(dental, ADD_CLEANING)) == 1


def test_the_dental_tool_written_with_date_passes(dental):
    tool = {**ADD_CLEANING, "steps": [dict(s) for s in ADD_CLEANING["steps"]]}
    tool["steps"][2]["sql"] = tool["steps"][2]["sql"].replace(":today + 1", "date(:today, '+1 day')")
    assert static_checks.check_tool(dental, tool, static_checks.dated_columns(dental)) == []


def test_dated_columns_are_read_from_the_values(dental):
    # dates and date-times count; an integer flag, names, ages and empty columns do not
    assert static_checks.dated_columns(dental) == {("appointments", "start_date"), ("appointments", "end_date")}
    dental.execute("UPDATE appointments SET end_date = 'soon' WHERE appointment_id = 2")
    assert static_checks.dated_columns(dental) == {("appointments", "start_date")}


@pytest.mark.parametrize(("sql", "found"), [
    ("INSERT INTO loans (due_date) VALUES (:today + 14)", [":today + 14"]),
    ("SELECT * FROM loans WHERE due_date < :now - 3600", [":now - 3600"]),
    ("UPDATE loans SET due_date = due_date + 7 WHERE id = :id", ["due_date + 7"]),
    ("SELECT l.id FROM loans AS l WHERE (l.loan_date) * 2 > 0", ["(l.loan_date) * 2"]),
    ("SELECT due_date / 2 FROM loans", ["due_date / 2"]),
    ("SELECT date(:today) + 1", ["DATE(:today) + 1"]),
    ("SELECT datetime(:now, '+1 hour') - 1", ["DATETIME(:now, '+1 hour') - 1"]),
    ("SELECT julianday(due_date) - julianday(:today) FROM loans", []),
    ("SELECT date(:today, '+1 day'), datetime(:now, '-2 hours')", []),
    ("UPDATE loans SET fee = fee + :extra * 2 WHERE id = :id", []),
    ("SELECT due_date + 1 FROM books", []),  # books has no dated column due_date
    ("SELECT FROM WHERE +", []),
])
def test_date_arithmetic_shapes(sql, found):
    assert date_arithmetic(sql, DATED, CLOCK) == found


def test_dated_outputs_of_a_query():
    assert dated_outputs("SELECT id, due_date, loan_date AS out_on, :today AS t, fee FROM loans", DATED) == \
        {"due_date", "out_on", "t"}
    assert dated_outputs("SELECT * FROM loans WHERE id = :id", DATED) == {"due_date", "loan_date"}
    assert dated_outputs("SELECT * FROM books", DATED) == set()


@pytest.fixture
def lending():
    c = engine.connect(":memory:")
    c.execute("CREATE TABLE loans (id INTEGER PRIMARY KEY, due_date TEXT, loan_date TEXT, fee REAL)")
    c.execute("INSERT INTO loans VALUES (1, '2026-01-20', '2026-01-06', 0.5)")
    yield c
    c.close()


def extend(write_sql):
    return {"name": "extend_loan", "description": "x", "kind": "write",
            "params": [{"name": "id", "type": "integer"}],
            "steps": [{"kind": "query", "sql": "SELECT due_date FROM loans WHERE id = :id", "bind": "loan"},
                      {"kind": "write", "sql": write_sql}],
            "returns": None}


def test_a_bound_date_column_is_a_date(lending):
    dated = static_checks.dated_columns(lending)
    (problem,) = static_checks.check_tool(lending, extend("UPDATE loans SET due_date = :loan_due_date + 7 "
                                                          "WHERE id = :id"), dated)
    assert problem.startswith("tool 'extend_loan' step 2 (write): :loan_due_date + 7 ")
    assert static_checks.check_tool(lending, extend("UPDATE loans SET due_date = date(:loan_due_date, '+7 days'), "
                                                    "fee = fee + 1 WHERE id = :id"), dated) == []
