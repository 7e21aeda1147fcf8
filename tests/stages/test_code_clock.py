"""A code pattern of a date or a time of day draws valid ones: the blood bank's 'time' column (examples '14:30',
'18:00', '12:15', '10:45', pattern '1#:##') held '17:73' and '10:90' in 32 of 76 rows when each digit was drawn
alone, and its create tasks asked for them."""

from __future__ import annotations

import random
from datetime import date, datetime, time

from pipeline import ir
from pipeline.dbmodel.draws import code_capacity, code_value, drawn
from pipeline.stages.rows import generators as rowgen

BLOOD_TIMES = ["14:30", "18:00", "12:15", "10:45"]


def _clock(text: str) -> time:
    return time.fromisoformat(text if len(text.split(":")[0]) == 2 else "0" + text)


def test_the_blood_banks_times_are_times_of_day_within_the_examples_hours() -> None:
    pattern = rowgen.digit_pattern(BLOOD_TIMES, None)
    assert pattern == "1#:##"
    g = ir.ColumnGenerator(column="time", kind="code", pattern=pattern, by="code", note="")
    values = drawn(g, "en_US", 870441100428049688, 400)  # the task planner's new values, as the rows' maker's
    rng = random.Random(7)
    values += [code_value(rng, pattern) for _ in range(400)]
    assert all(10 <= _clock(v).hour <= 19 for v in values)
    assert len({v[:2] for v in values}) == 10 and len({v[3:] for v in values}) == 60  # every hour and minute


def test_times_with_seconds_of_one_hour_digit_and_inside_other_text_are_valid() -> None:
    rng = random.Random(3)
    for pattern in ("##:##", "##:##:##", "#:##", "0#:#5"):
        for _ in range(300):
            _clock(code_value(rng, pattern))
    for _ in range(300):
        shift = code_value(rng, "SH-##:##/##:##")
        assert shift.startswith("SH-") and shift[3:].count("/") == 1
        for part in shift[3:].split("/"):
            _clock(part)
    assert {code_value(rng, "12:##")[:3] for _ in range(50)} == {"12:"}


def test_dates_and_date_times_are_valid_calendar_days() -> None:
    rng = random.Random(5)
    days = [code_value(rng, "20##-##-##") for _ in range(2000)]
    assert all(date.fromisoformat(d).year >= 2000 for d in days)
    assert {d[5:7] for d in days} == {f"{m:02d}" for m in range(1, 13)}  # every month, no 13th
    for _ in range(300):
        datetime.fromisoformat(code_value(rng, "####-##-##T##:##:##"))
        date.fromisoformat(code_value(rng, "19##-02-##"))  # no February 30
    assert all(date.fromisoformat(code_value(rng, "####-02-29")).month == 2 for _ in range(50))  # leap years only


def test_other_codes_draw_each_digit_as_before() -> None:
    for pattern in ("AB-####", "###-###-####", "9780#########", "??-##", "4#:###", "12.34.##", "2026-1#-3#5"):
        rng, old = random.Random(11), random.Random(11)
        expected = "".join(str(old.randrange(10)) if ch == "#" else old.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                           if ch == "?" else ch for ch in pattern)
        assert code_value(rng, pattern) == expected


def test_minutes_and_seconds_stay_below_sixty_when_the_first_field_is_no_hour() -> None:
    rng = random.Random(2)
    assert all(int(v[3:]) < 60 and v.startswith("4") for v in (code_value(rng, "4#:##") for _ in range(300)))


def test_capacity_counts_only_the_valid_dates_and_times() -> None:
    assert code_capacity("1#:##") == 600
    assert code_capacity("##:##:##") == 86_400
    assert code_capacity("20##-##-##") == 36_525  # 25 leap years in 2000..2099
    assert code_capacity("AB-####") == 10_000 and code_capacity("??-#") == 6760
    g = ir.ColumnGenerator(column="time", kind="code", pattern="1#:##", by="code", note="")
    assert rowgen.capacity(g) == 600
    # a UNIQUE column of 70 rows needs 700: "1#:##" gives 600, so the examples' common hour digit is dropped
    assert rowgen.digit_pattern(BLOOD_TIMES, 70) == "##:##"
    assert rowgen.digit_pattern(BLOOD_TIMES, 50) == "1#:##"


def test_a_letter_after_the_time_marks_a_twelve_hour_clock_in_any_script_but_not_isos_zone() -> None:
    rng = random.Random(4)
    for pattern in ("##:## PM", "##:##午後", "1#:## pm"):
        hours = {int(code_value(rng, pattern)[:2]) for _ in range(300)}
        assert hours <= set(range(1, 13)) and len(hours) >= 3
    assert code_capacity("##:## PM") == 720
    assert max(int(code_value(rng, "##:##Z")[:2]) for _ in range(300)) > 12  # UTC, a 24-hour clock
