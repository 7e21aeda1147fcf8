"""How well the MiniLM backstop (``pipeline.meaning.personal``) separates columns that record a personal
characteristic from the ordinary columns of people, in English, German, Spanish and French.

    .venv/bin/python benchmarks/bench_personal_columns.py            # distributions per language, then every column
    .venv/bin/python benchmarks/bench_personal_columns.py --json     # one JSON line

Two sets, labelled here (this file is a measuring stick: its labels are English and other words, the product's
check holds none):
- real: every column of every schema the committed example's LLM cache holds (the schema model's replies:
  ``generated/quickstart/llm_cache.sqlite``), with its CHECK-listed values; a characteristic when its name is one
  of :data:`REAL_PERSONAL`.
- written: :data:`WRITTEN`, columns as small models write them for people (patients, members, employees...),
  the characteristics and the ordinary columns beside them, in four languages, some with CHECK-listed values.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.dbmodel.columns import check_enums  # noqa: E402
from pipeline.meaning.personal import THRESHOLD, score_columns  # noqa: E402

REAL_PERSONAL = {"gender", "ethnicity", "religion", "nationality", "marital_status", "disability", "pregnancy"}

P, N = True, False
WRITTEN: list[tuple[str, str, tuple[str, ...], bool, str]] = [
    # English: characteristics
    ("patients", "gender", ("male", "female"), P, "en"), ("patients", "gender", ("M", "F"), P, "en"),
    ("members", "sex", ("M", "F"), P, "en"), ("patients", "sex", (), P, "en"),
    ("employees", "race", (), P, "en"), ("patients", "race", ("white", "black", "asian"), P, "en"),
    ("customers", "ethnic_group", (), P, "en"), ("staff", "race_ethnicity", (), P, "en"),
    ("members", "religious_affiliation", (), P, "en"), ("guests", "faith", (), P, "en"),
    ("patients", "religion", ("christian", "muslim"), P, "en"), ("players", "nationality", (), P, "en"),
    ("applicants", "citizenship", (), P, "en"),
    ("employees", "marital_status", ("single", "married", "divorced"), P, "en"), ("clients", "civil_status", (), P, "en"),
    ("patients", "is_married", (), P, "en"), ("employees", "disability_status", (), P, "en"),
    ("students", "is_disabled", (), P, "en"), ("patients", "handicap", (), P, "en"),
    ("patients", "is_pregnant", (), P, "en"), ("patients", "pregnancy_status", ("yes", "no"), P, "en"),
    ("patients", "pregnant", (), P, "en"), ("members", "sexual_orientation", (), P, "en"),
    ("voters", "political_party", (), P, "en"), ("employees", "gender_identity", (), P, "en"),
    ("citizens", "caste", (), P, "en"), ("patients", "patientGender", (), P, "en"),
    # English: ordinary columns of people (and an animal's sex, which a veterinary clinic needs)
    ("patients", "allergies", (), N, "en"), ("patients", "medical_history", (), N, "en"),
    ("members", "date_of_birth", (), N, "en"), ("patients", "dob", (), N, "en"), ("patients", "birth_date", (), N, "en"),
    ("members", "membership_tier", ("basic", "gold"), N, "en"), ("members", "status", ("active", "suspended"), N, "en"),
    ("patients", "status", ("active", "inactive"), N, "en"), ("books", "genre", ("fiction", "non-fiction"), N, "en"),
    ("doctors", "specialty", (), N, "en"), ("customers", "first_name", (), N, "en"),
    ("customers", "last_name", (), N, "en"), ("customers", "city", (), N, "en"), ("customers", "country", (), N, "en"),
    ("customers", "country_of_residence", (), N, "en"), ("customers", "postal_code", (), N, "en"),
    ("patients", "blood_type", (), N, "en"), ("patients", "height_cm", (), N, "en"), ("patients", "weight_kg", (), N, "en"),
    ("employees", "job_title", (), N, "en"), ("employees", "salary", (), N, "en"), ("employees", "department", (), N, "en"),
    ("employees", "hire_date", (), N, "en"), ("users", "username", (), N, "en"), ("guests", "preferred_language", (), N, "en"),
    ("guests", "language", (), N, "en"), ("patients", "emergency_contact", (), N, "en"),
    ("patients", "insurance_number", (), N, "en"), ("members", "loyalty_points", (), N, "en"),
    ("students", "grade", (), N, "en"), ("students", "enrollment_date", (), N, "en"),
    ("drivers", "license_number", (), N, "en"), ("patients", "diagnosis", (), N, "en"), ("patients", "notes", (), N, "en"),
    ("guests", "dietary_restrictions", (), N, "en"), ("members", "occupation", (), N, "en"),
    ("customers", "title", ("Mr", "Ms", "Dr"), N, "en"), ("customers", "salutation", ("Mr", "Mrs"), N, "en"),
    ("tenants", "household_size", (), N, "en"), ("employees", "employment_status", ("full-time", "part-time"), N, "en"),
    ("guests", "room_type", ("single", "double"), N, "en"), ("members", "member_type", ("adult", "child", "senior"), N, "en"),
    ("customers", "customer_type", ("individual", "business"), N, "en"), ("patients", "smoker", (), N, "en"),
    ("patients", "primary_physician", (), N, "en"), ("patients", "place_of_birth", (), N, "en"),
    ("members", "relationship", ("parent", "child"), N, "en"), ("patients", "next_of_kin", (), N, "en"),
    ("patients", "spouse_name", (), N, "en"), ("employees", "veteran_status", (), N, "en"),
    ("patients", "has_insurance", (), N, "en"), ("tickets", "class", ("economy", "business"), N, "en"),
    ("members", "membership_status", ("active", "lapsed"), N, "en"), ("patients", "phoneNumber", (), N, "en"),
    ("animals", "species", (), N, "en"), ("animals", "sex", ("male", "female"), N, "en"),
    # German
    ("patienten", "geschlecht", ("männlich", "weiblich"), P, "de"), ("patienten", "geschlecht", (), P, "de"),
    ("mitglieder", "religion", (), P, "de"), ("kunden", "konfession", (), P, "de"),
    ("patienten", "staatsangehoerigkeit", (), P, "de"), ("patienten", "nationalitaet", (), P, "de"),
    ("mitarbeiter", "familienstand", ("ledig", "verheiratet", "geschieden"), P, "de"),
    ("patienten", "behinderung", (), P, "de"), ("patienten", "schwangerschaft", (), P, "de"),
    ("kunden", "ethnische_herkunft", (), P, "de"),
    ("patienten", "name", (), N, "de"), ("patienten", "vorname", (), N, "de"), ("patienten", "nachname", (), N, "de"),
    ("patienten", "geburtsdatum", (), N, "de"), ("patienten", "alter", (), N, "de"), ("patienten", "allergien", (), N, "de"),
    ("mitglieder", "email", (), N, "de"), ("mitglieder", "telefonnummer", (), N, "de"), ("mitglieder", "adresse", (), N, "de"),
    ("mitglieder", "mitgliedsstufe", (), N, "de"), ("mitglieder", "status", ("aktiv", "gesperrt"), N, "de"),
    ("kunden", "stadt", (), N, "de"), ("kunden", "land", (), N, "de"), ("kunden", "postleitzahl", (), N, "de"),
    ("mitarbeiter", "beruf", (), N, "de"), ("mitarbeiter", "gehalt", (), N, "de"), ("buecher", "titel", (), N, "de"),
    ("buecher", "autor", (), N, "de"), ("buecher", "gattung", (), N, "de"), ("patienten", "blutgruppe", (), N, "de"),
    ("patienten", "versicherungsnummer", (), N, "de"),
    # Spanish
    ("pacientes", "sexo", ("masculino", "femenino"), P, "es"), ("pacientes", "sexo", (), P, "es"),
    ("pacientes", "genero", (), P, "es"), ("socios", "religion", (), P, "es"), ("pacientes", "nacionalidad", (), P, "es"),
    ("empleados", "estado_civil", ("soltero", "casado"), P, "es"), ("empleados", "estado_civil", (), P, "es"),
    ("pacientes", "discapacidad", (), P, "es"), ("pacientes", "embarazo", (), P, "es"), ("clientes", "etnia", (), P, "es"),
    ("clientes", "raza", (), P, "es"),
    ("pacientes", "nombre", (), N, "es"), ("pacientes", "apellido", (), N, "es"),
    ("pacientes", "fecha_nacimiento", (), N, "es"), ("pacientes", "edad", (), N, "es"), ("pacientes", "alergias", (), N, "es"),
    ("socios", "correo", (), N, "es"), ("socios", "telefono", (), N, "es"), ("socios", "direccion", (), N, "es"),
    ("socios", "nivel_membresia", (), N, "es"), ("socios", "estado", ("activo", "suspendido"), N, "es"),
    ("clientes", "ciudad", (), N, "es"), ("clientes", "pais", (), N, "es"), ("empleados", "profesion", (), N, "es"),
    ("empleados", "salario", (), N, "es"), ("libros", "genero", ("ficcion", "no ficcion"), N, "es"),
    ("libros", "autor", (), N, "es"), ("pacientes", "tipo_sangre", (), N, "es"),
    # French
    ("patients", "sexe", ("homme", "femme"), P, "fr"), ("patients", "sexe", (), P, "fr"),
    ("clients", "genre", ("homme", "femme"), P, "fr"), ("membres", "religion", (), P, "fr"),
    ("patients", "nationalite", (), P, "fr"), ("employes", "situation_familiale", (), P, "fr"),
    ("employes", "etat_civil", ("celibataire", "marie"), P, "fr"), ("patients", "handicap", (), P, "fr"),
    ("patientes", "grossesse", (), P, "fr"), ("clients", "origine_ethnique", (), P, "fr"),
    ("patients", "nom", (), N, "fr"), ("patients", "prenom", (), N, "fr"), ("patients", "date_naissance", (), N, "fr"),
    ("patients", "age", (), N, "fr"), ("patients", "allergies", (), N, "fr"), ("membres", "courriel", (), N, "fr"),
    ("membres", "telephone", (), N, "fr"), ("membres", "adresse", (), N, "fr"), ("membres", "niveau_adhesion", (), N, "fr"),
    ("membres", "statut", ("actif", "suspendu"), N, "fr"), ("clients", "ville", (), N, "fr"), ("clients", "pays", (), N, "fr"),
    ("employes", "metier", (), N, "fr"), ("employes", "salaire", (), N, "fr"), ("livres", "genre", ("roman", "essai"), N, "fr"),
    ("livres", "auteur", (), N, "fr"), ("patients", "groupe_sanguin", (), N, "fr"),
]


def real_columns(cache: Path) -> list[tuple[str, str, tuple[str, ...], bool, str]]:
    """Every column of the schema replies in ``cache`` (a statement SQLite refuses is left out), once per
    (table, column, listed values)."""
    conn = sqlite3.connect(f"file:{cache}?mode=ro&immutable=1", uri=True)
    seen: dict[tuple[str, str, tuple[str, ...]], None] = {}
    for (content,) in conn.execute("SELECT content FROM responses"):
        try:
            reply = json.loads(content)
        except ValueError:
            continue
        if not isinstance(reply, dict) or not isinstance(reply.get("tables"), list):
            continue
        for item in reply["tables"]:
            ddl = str(item.get("ddl", "")).strip().rstrip(",").strip() if isinstance(item, dict) else ""
            scratch = sqlite3.connect(":memory:")
            try:
                scratch.execute(ddl)
            except sqlite3.Error:
                continue
            table = scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            enums = {k.lower(): v for k, v in check_enums(ddl).items()}
            for r in scratch.execute(f'PRAGMA table_info("{table}")'):
                vals = tuple(str(v) for v in enums.get(r[1].lower(), ()))
                seen.setdefault((table, r[1], vals), None)
    return [(t, c, v, c.lower() in REAL_PERSONAL, "en (real)") for t, c, v in seen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=ROOT / "generated" / "quickstart" / "llm_cache.sqlite")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = real_columns(args.cache) + WRITTEN
    found = score_columns([(t, c, v) for t, c, v, _, _ in rows])
    groups: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for (t, c, v, label, lang), f in zip(rows, found, strict=True):
        name = f"{t}.{c}" + (f" ({', '.join(v)})" if v else "")
        groups.setdefault(lang, {"personal": [], "ordinary": []})["personal" if label else "ordinary"].append(
            (f.score, name))
    summary = {}
    for lang, g in groups.items():
        pos, neg = sorted(g["personal"]), sorted(g["ordinary"], reverse=True)
        summary[lang] = {
            "personal": len(pos), "caught": sum(s >= THRESHOLD for s, _ in pos),
            "personal_min_median_max": [pos[0][0], round(statistics.median(s for s, _ in pos), 3), pos[-1][0]] if pos else None,
            "ordinary": len(neg), "dropped": sum(s >= THRESHOLD for s, _ in neg),
            "ordinary_max_median": [neg[0][0], round(statistics.median(s for s, _ in neg), 3)] if neg else None,
            "missed": [f"{n} {s}" for s, n in pos if s < THRESHOLD],
            "false_drops": [f"{n} {s}" for s, n in neg if s >= THRESHOLD],
            "highest_ordinary": [f"{n} {s}" for s, n in neg[:4]],
        }
    if args.json:
        print(json.dumps({"threshold": THRESHOLD, "languages": summary}, sort_keys=True))
        return
    print(f"threshold {THRESHOLD}\n")
    print("| set | personal caught | personal min / median / max | ordinary dropped | ordinary max / median |")
    print("|---|---|---|---|---|")
    for lang, s in summary.items():
        print(f"| {lang} | {s['caught']}/{s['personal']} | {s['personal_min_median_max']} | "
              f"{s['dropped']}/{s['ordinary']} | {s['ordinary_max_median']} |")
    for lang, s in summary.items():
        print(f"\n{lang}: missed {s['missed']}\n  false drops {s['false_drops']}\n  highest ordinary {s['highest_ordinary']}")
    print("\nevery column (score, label, name, nearest definition):")
    for (t, c, v, label, lang), f in sorted(zip(rows, found, strict=True), key=lambda x: (x[0][4], -x[1].score)):
        print(f"  {lang:9s} {f.score:.3f} {'P' if label else '.'} {t}.{c}{' ' + str(list(v)) if v else ''}  ~ {f.concept}")


if __name__ == "__main__":
    main()
