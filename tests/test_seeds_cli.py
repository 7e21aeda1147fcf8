"""``envfoundry seeds check``, ``envfoundry dedup`` and ``envfoundry expand`` through the real CLI.

``expand`` talks over real HTTP on loopback to a scripted OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.cli import main

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ---------------------------------------------------------------- seeds check


def test_seeds_check_clean_file() -> None:
    r = run("seeds", "check", REPO / "seeds" / "domains.txt")
    assert r.exit_code == 0, r.output
    assert "118 seeds, 0 exact and 0 near duplicates" in r.output


def test_seeds_check_reports_exact_and_near_duplicates(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"
    p.write_text("Hotel booking: guests reserve rooms\nPayroll\nhotel BOOKING\nHotel reservations: guests book rooms\n")
    r = run("seeds", "check", p)
    assert r.exit_code == 1
    assert f"{p}:3: exact duplicate of line 1" in r.output
    assert f"{p}:4: near duplicate of line 1" in r.output
    r = run("seeds", "check", p, "--json", "--threshold", "1")
    data = json.loads(r.output)
    assert r.exit_code == 1 and data["seeds"] == 4
    assert data["exact"] == {"groups": 1, "repeats": 1, "listed": [
        {"name": "Hotel booking", "first_line": 1, "repeats": 1, "lines": [3]}]}
    assert data["near"] == {"pairs": 0, "listed": []}


def test_seeds_check_groups_repeated_lines_and_bounds_the_output(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"
    p.write_text("Payroll\n" + "Hotel booking: guests reserve rooms\n" * 2000 + "hotel  BOOKING!\n")
    r = run("seeds", "check", p)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert len(lines) == 2, r.output  # one line for the group, one summary (was 2 million pair lines)
    assert lines[0].startswith(f"{p}:3: exact duplicate of line 2 ('Hotel booking'); 2,000 repeats on lines 3, 4, ")
    assert lines[0].endswith(", 22 and 1,980 more")
    assert lines[1] == f"{p}: 2002 seeds, 2000 exact and 0 near duplicates (cosine >= 0.75)"
    data = json.loads(run("seeds", "check", p, "--json").output)
    assert data["exact"]["repeats"] == 2000 and data["exact"]["listed"][0]["repeats"] == 2000
    assert len(data["exact"]["listed"][0]["lines"]) == 20 and data["exact"]["listed"][0]["lines"][-1] == 22


def test_seeds_check_lists_at_most_limit_groups(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"
    p.write_text("".join(f"Domain {i}\nDomain {i}\n" for i in range(120)))
    r = run("seeds", "check", p, "--threshold", "1", "--limit", "10")
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert len(lines) == 12 and lines[0] == f"{p}:2: exact duplicate of line 1 ('Domain 0')"
    assert lines[10] == f"{p}: ... and 110 more repeated names (--limit to list more)"
    data = json.loads(run("seeds", "check", p, "--threshold", "1", "--json").output)
    assert data["exact"]["groups"] == 120 and len(data["exact"]["listed"]) == 50


def test_seeds_check_bounds_near_duplicate_pairs(tmp_path: Path) -> None:
    p = tmp_path / "s.txt"  # 150 different names that all read alike: 11,175 pairs above the threshold
    p.write_text("".join(f"Hotel room booking for branch number {i}\n" for i in range(150)))
    r = run("seeds", "check", p, "--limit", "5")
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert len(lines) == 7, r.output
    assert all(" near duplicate of line " in ln for ln in lines[:5])
    sims = [float(ln.rsplit("cosine ", 1)[1].rstrip(")")) for ln in lines[:5]]
    assert sims == sorted(sims, reverse=True) and sims[-1] >= 0.75
    total = int(lines[6].split(" exact and ")[1].split(" near")[0])
    assert total > 5000 and lines[5] == (f"{p}: ... and {total - 5:,} more near-duplicate pairs (the most similar "
                                         "are listed; --limit to list more)")
    data = json.loads(run("seeds", "check", p, "--json").output)
    assert data["near"]["pairs"] == total and len(data["near"]["listed"]) == 50


@pytest.mark.parametrize(("content", "where"), [
    (b"", ""), (b"ok\n\x00\x01\x02", ":2"), (b'{"name": "a"}\n{"name": \n', ":2"),
])
def test_seeds_check_bad_files_exit_2_naming_file_and_line(tmp_path: Path, content: bytes, where: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    r = run("seeds", "check", p)
    assert r.exit_code == 2
    assert f"error: {p}{where}:" in r.output


def test_seeds_check_missing_file_exits_2(tmp_path: Path) -> None:
    r = run("seeds", "check", tmp_path / "nope.txt")
    assert r.exit_code == 2 and "nope.txt: seed file not found" in r.output


# ---------------------------------------------------------------- dedup

RECORDS = [
    {"name": "Hotel room reservations", "description": "Guests search available rooms for their dates, book a room, "
     "change the dates of a reservation or cancel it.", "source": "run-1"},
    {"name": "Hotel booking system", "description": "Travellers look up free rooms for a stay, reserve one, modify or "
     "cancel existing bookings.", "source": "run-1"},
    {"name": "Payroll processing", "description": "Payroll staff run monthly payroll for employees, applying tax "
     "deductions and issuing payslips."},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_dedup_writes_kept_records_and_rejections(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    r = run("dedup", src, "--out", tmp_path / "out.jsonl")
    assert r.exit_code == 0, r.output
    assert "3 records: kept 2, duplicates 1" in r.output
    kept = read_jsonl(tmp_path / "out.jsonl")
    assert [k["name"] for k in kept] == ["Hotel room reservations", "Payroll processing"]
    assert kept[0]["source"] == "run-1"  # extra keys are carried through
    (rej,) = read_jsonl(tmp_path / "out.rejected.jsonl")
    assert rej["stage"] == "dedup" and rej["evidence"]["line"] == 2
    assert rej["evidence"]["duplicate_of"]["name"] == "Hotel room reservations"
    r = run("dedup", src, "--out", tmp_path / "strict.jsonl", "--threshold", "0.95", "--json")
    assert json.loads(r.output)["kept"] == 3


def test_dedup_index_persists_between_invocations(tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = write_jsonl(tmp_path / "a.jsonl", [RECORDS[0], RECORDS[2]])
    r = run("dedup", first, "--out", tmp_path / "a.out.jsonl", "--index", idx)
    assert r.exit_code == 0 and "index" in r.output and "0 -> 2 scenarios" in r.output
    second = write_jsonl(tmp_path / "b.jsonl", [RECORDS[1]])
    r = run("dedup", second, "--out", tmp_path / "b.out.jsonl", "--index", idx, "--json")
    out = json.loads(r.output)
    assert out["kept"] == 0 and out["duplicates"] == 1 and out["index_size"] == [2, 2]
    assert read_jsonl(tmp_path / "b.out.rejected.jsonl")[0]["evidence"]["duplicate_of"]["in"] == "catalog"


def test_dedup_bad_input_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(RECORDS[0]) + "\n{oops\n")
    r = run("dedup", src, "--out", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and f"{src}:2: malformed JSON" in r.output
    src.write_text(json.dumps({"name": "x"}) + "\n")
    r = run("dedup", src, "--out", tmp_path / "out.jsonl")
    assert r.exit_code == 2 and f"{src}:1: 'description'" in r.output
    assert not (tmp_path / "out.jsonl").exists()


# ---------------------------------------------------------------- expand over loopback HTTP


class ScriptedLLM:
    """A minimal OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 answering from a script."""

    def __init__(self, replies: list[dict]):
        self.replies = list(replies)
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.prompts.append(body["messages"][-1]["content"])
                content = json.dumps(outer.replies.pop(0))
                payload = json.dumps({
                    "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def scripted_llm() -> Iterator[Any]:
    def make(replies: list[dict]) -> ScriptedLLM:
        llm = ScriptedLLM(replies)
        llm.thread.start()
        made.append(llm)
        return llm

    made: list[ScriptedLLM] = []
    yield make
    for llm in made:
        llm.server.shutdown()
        llm.server.server_close()


def proposal(name: str, description: str, entities: list[str], goals: list[str], suitable: bool = True) -> dict:
    return {"name": name, "description": description, "entities": entities, "goals": goals,
            "simulation": "Records and tools capture it." if suitable else "It is a live feed of free text.",
            "suitable": suitable}


def test_expand_prints_the_counts_and_writes_scenarios(tmp_path: Path, scripted_llm: Any) -> None:
    llm = scripted_llm([
        proposal("Branch library loans", "Librarians lend books to members, record returns and charge late fees.",
                 ["member", "book", "loan"], ["Lend a book", "Record a return"]),
        proposal("Library social feed", "Members post and scroll reviews and photos in a live feed.",
                 ["member", "post"], ["Post a review", "Scroll the feed"], suitable=False),
        proposal("Library circulation desk", "Library staff check books out to borrowers, check them back in and "
                 "collect overdue fines.", ["borrower", "book", "checkout"], ["Check a book out", "Check a book in"]),
        proposal("Library event room hire", "Community groups hire the library's meeting rooms for evening events "
                 "and pay a deposit.", ["group", "meeting room", "hire", "deposit"],
                 ["Hire a room for an event", "Refund a deposit"]),
    ])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("Library lending: members borrow, renew and return books\n")
    out = tmp_path / "scenarios.jsonl"
    r = run("expand", "--seeds", seeds, "--out", out, "-n", "3", "--index", tmp_path / "dedup",
            "--base-url", llm.url, "--model", "scripted", "--no-cache")
    assert r.exit_code == 0, r.output
    for line in ("generated:              4", "rejected as unsuitable: 1", "rejected as duplicates: 1",
                 "kept:                   2"):
        assert line in r.output
    kept = read_jsonl(out)
    assert [k["name"] for k in kept] == ["Branch library loans", "Library event room hire"]
    assert kept[0]["seed"] == "Library lending" and kept[0]["entities"] == ["member", "book", "loan"]
    reasons = {r["evidence"]["kind"]: r for r in read_jsonl(tmp_path / "scenarios.rejected.jsonl")}
    assert set(reasons) == {"unsuitable", "duplicate"}
    assert "live feed" in reasons["unsuitable"]["reason"]
    assert reasons["duplicate"]["evidence"]["duplicate_of"]["name"] == "Branch library loans"
    assert "- Branch library loans:" in llm.prompts[1] and "- Library social feed:" in llm.prompts[2]
    assert json.loads((tmp_path / "dedup" / "meta.json").read_text())["count"] == 2


def test_expand_bad_seed_file_exits_2(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"name": "ok"}\n{"nam": "typo"}\n')
    r = run("expand", "--seeds", seeds, "--out", tmp_path / "o.jsonl", "--base-url", "http://127.0.0.1:9/v1",
            "--model", "m")
    assert r.exit_code == 2 and f"{seeds}:2:" in r.output


def test_every_command_has_help() -> None:
    for cmd in (["seeds", "check"], ["dedup"], ["expand"]):
        r = run(*cmd, "--help")
        assert r.exit_code == 0 and len(r.output.splitlines()) > 5
