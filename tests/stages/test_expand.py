"""Expansion with a scripted fake LLM (the real client code runs), and expand_and_dedup end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import ConfigError, validate_config
from pipeline.llm import fake_client
from pipeline.scenarios.dedup import DedupIndex, DedupSettings
from pipeline.scenarios.expand import ExpandSettings, ScenarioSettings, expand_and_dedup, expand_seed
from pipeline.seeds import Seed

LIB = Seed(name="Library lending", description="members borrow and return books", source="s.txt", line=1)
HOTEL = Seed(name="Hotel", source="s.txt", line=2)


def proposal(name: str, description: str, entities: str, goals: str, suitable: bool = True,
             why: str = "Tables and tools capture it.") -> dict:
    return {"name": name, "description": description, "entities": entities.split(", "),
            "goals": goals.split("; "), "simulation": why, "suitable": suitable}


LOANS = proposal("Branch library loans", "Librarians lend books to members, record returns and charge late fees.",
                 "member, book, loan, late fee", "Lend a book to a member; Record a return; Charge a late fee")
FEED = proposal("Library news feed", "Members scroll a live feed of library news and social posts.",
                "post, member", "Read the latest posts; Like a post", False,
                "A live social feed is free text and media, not records a database can simulate.")
ROOMS = proposal("Library study room booking", "Students reserve the library's group study rooms in two-hour "
                 "blocks; each room has a capacity and equipment such as a screen or whiteboard.",
                 "student, study room, time block, equipment", "Reserve a room for a study group; "
                 "Find a room with a screen; Cancel a reservation")
ACQ = proposal("Library acquisitions", "Librarians order new titles from vendors within a yearly budget.",
               "title, vendor, purchase order, budget", "Order a title from a vendor; Check the remaining budget")


def prompt_of(request: list[dict[str, Any]]) -> str:
    return request[-1]["content"]


def test_unsuitable_is_rejected_with_its_reason_and_accepted_ones_feed_later_prompts() -> None:
    client = fake_client([LOANS, FEED, ROOMS])
    result = expand_seed(LIB, client, ExpandSettings(scenarios_per_seed=2))
    assert [s.name for s in result.value] == ["Branch library loans", "Library study room booking"]
    assert all(s.seed == "Library lending" for s in result.value)
    assert result.value[0].entities == ["member", "book", "loan", "late fee"]
    assert result.value[0].goals[0] == "Lend a book to a member"
    assert result.attempts == 3
    (rej,) = result.rejections
    assert rej.stage == "expand" and rej.evidence["kind"] == "unsuitable"
    assert "live social feed" in rej.reason and rej.evidence["scenario"]["name"] == "Library news feed"
    assert rej.evidence["seed"]["name"] == "Library lending"

    first, second, third = (prompt_of(r) for r in client.requests)
    assert "Library lending: members borrow and return books" in first
    assert "Already proposed" not in first
    assert "- Branch library loans: Librarians lend books" in second
    # the accepted list grows, and an unsuitable proposal is listed as rejected so it is not proposed again
    assert "- Branch library loans" in third and "- Library news feed: " in third and "not simulatable" in third
    # each proposal is asked to focus on a different part of the business
    assert "focused on the main transaction" in first and "focused on staff scheduling" in second
    assert "focused on inventory" in third


def test_stops_at_n_and_caps_attempts() -> None:
    client = fake_client([LOANS, ROOMS, ACQ])
    result = expand_seed(LIB, client, ExpandSettings(scenarios_per_seed=2))
    assert len(result.value) == 2 and len(client.requests) == 2  # no third call

    always_unsuitable = fake_client([proposal(f"Feed {i}", "A live stream of posts and videos.", "post, video",
                                              "Watch a video; Read a post", False)
                                     for i in range(10)])
    result = expand_seed(LIB, always_unsuitable, ExpandSettings(scenarios_per_seed=2, extra_attempts=1))
    assert result.value == () and result.attempts == 3 and len(always_unsuitable.requests) == 3
    assert [r.evidence["kind"] for r in result.rejections] == ["unsuitable"] * 3


def test_a_repeated_proposal_is_rejected_as_a_repeat() -> None:
    same_name = dict(LOANS, description="Members borrow books at the branch.")
    client = fake_client([LOANS, same_name, ROOMS])
    result = expand_seed(LIB, client, ExpandSettings(scenarios_per_seed=2))
    assert [s.name for s in result.value] == ["Branch library loans", "Library study room booking"]
    (rej,) = result.rejections
    assert rej.evidence["kind"] == "repeat" and rej.evidence["duplicate_of"]["name"] == "Branch library loans"
    assert prompt_of(client.requests[1]) != prompt_of(client.requests[2])


def test_invalid_replies_end_the_seed_as_an_llm_error() -> None:
    bad = {"name": "x"}  # schema-invalid every time: the client retries with the error fed back, then gives up
    client = fake_client([bad, bad, bad, LOANS], validation_retries=2)
    result = expand_seed(LIB, client, ExpandSettings(scenarios_per_seed=2))
    assert result.value == () and result.attempts == 0
    (rej,) = result.rejections
    assert rej.evidence["kind"] == "llm_error" and "ScenarioReply" in rej.reason
    assert len(client.requests) == 3 and "invalid" in client.requests[1][-1]["content"]


def scripted(replies: dict[str, list[dict]]) -> Any:
    """A reply function keyed by the seed named in the prompt (seeds may be asked in any order)."""

    def reply(messages: list[dict[str, Any]]) -> dict:
        text = prompt_of(messages)
        for seed, queue in replies.items():
            if f"Domain seed: {seed}" in text:
                return queue.pop(0)
        raise AssertionError(f"unexpected prompt {text[:200]}")

    return reply


HOTEL_BOOK = proposal("Hotel room reservations", "Guests search available rooms for their dates, book a room, "
                      "change the dates of a reservation or cancel it.", "guest, room, reservation",
                      "Find free rooms for dates; Book a room; Cancel a reservation")
HOTEL_BOOK_2 = proposal("Hotel booking desk", "Travellers look up free rooms for a stay, reserve one, modify or "
                        "cancel existing bookings.", "traveller, room, booking",
                        "Look up free rooms; Reserve a room; Change a booking")
HOUSEKEEPING = proposal("Hotel housekeeping", "Supervisors assign rooms to be cleaned to housekeepers each shift "
                        "and inspect them before release.", "room, housekeeper, cleaning task, inspection",
                        "Assign rooms to a housekeeper; Mark a room cleaned; Inspect a room")


def test_expand_and_dedup_counts_and_persistence(tmp_path: Path) -> None:
    # the threshold decides here; the LLM judge of ambiguous pairs has its own tests (test_dedup_judge.py)
    settings = ScenarioSettings(expand=ExpandSettings(scenarios_per_seed=3), dedup=DedupSettings(judge=False))
    replies = {"Library lending": [LOANS, FEED, ROOMS, ACQ], "Hotel": [HOTEL_BOOK, HOTEL_BOOK_2, HOUSEKEEPING]}
    fn = scripted(replies)
    client = fake_client([fn] * 7)
    index = DedupIndex.open(tmp_path / "dedup", settings.dedup)
    progress = []
    kept, rejections, counts = expand_and_dedup([LIB, HOTEL], client, settings, index, on_seed=progress.append)
    assert [p.seed.name for p in progress] == ["Library lending", "Hotel"] and progress[-1].total == 2
    assert [s.name for s in kept] == ["Branch library loans", "Library study room booking", "Library acquisitions",
                                      "Hotel room reservations", "Hotel housekeeping"]
    assert counts == {"seeds": 2, "generated": 7, "unsuitable": 1, "duplicates": 1, "capped": 0, "failed": 0,
                      "kept": 5, "already_indexed": 0}
    assert counts["generated"] == counts["unsuitable"] + counts["duplicates"] + counts["capped"] + counts["kept"]
    dup = next(r for r in rejections if r.stage == "dedup")
    assert dup.evidence["scenario"]["name"] == "Hotel booking desk"
    assert dup.evidence["duplicate_of"]["name"] == "Hotel room reservations"
    assert json.loads((tmp_path / "dedup" / "meta.json").read_text())["count"] == 5  # saved

    # a later run with a new seed list: a paraphrase of a catalogued scenario is not re-added
    later = Seed(name="Hotel reservations", source="more.txt", line=1)
    client2 = fake_client([proposal("Room booking for guests", "Guests find free hotel rooms for their dates, "
                                    "book one, and change or cancel the reservation.", "guest, hotel room, reservation",
                                    "Find a free room; Book a room; Cancel a reservation")])
    index2 = DedupIndex.open(tmp_path / "dedup", settings.dedup)
    kept2, rej2, counts2 = expand_and_dedup([later], client2, ScenarioSettings(
        expand=ExpandSettings(scenarios_per_seed=1, extra_attempts=0), dedup=DedupSettings(judge=False)), index2)
    assert kept2 == [] and counts2["duplicates"] == 1
    assert rej2[0].evidence["duplicate_of"]["in"] == "catalog"
    assert len(DedupIndex.open(tmp_path / "dedup", settings.dedup)) == 5


def test_expand_and_dedup_cap_and_in_memory_index() -> None:
    settings = ScenarioSettings(expand=ExpandSettings(scenarios_per_seed=3), dedup=DedupSettings(max_per_seed=2))
    client = fake_client([LOANS, ROOMS, ACQ])
    kept, rejections, counts = expand_and_dedup([LIB], client, settings)
    assert len(kept) == 2 and counts["capped"] == 1 and rejections[0].evidence["kind"] == "cap"


def test_settings_from_config_name_bad_keys() -> None:
    cfg = validate_config({"stages": {"expand": {"scenarios_per_seed": 5}, "dedup": {"threshold": 0.6}}})
    s = ScenarioSettings.from_config(cfg, dedup={"threshold": 0.7, "model": None})
    assert s.expand.scenarios_per_seed == 5 and s.dedup.threshold == 0.7 and s.dedup.model == "all-MiniLM-L6-v2"
    with pytest.raises(ConfigError, match="unknown key 'stages.dedup.treshold'"):
        ScenarioSettings.from_config(validate_config({"stages": {"dedup": {"treshold": 0.6}}}))
    with pytest.raises(ConfigError, match="'stages.expand.scenarios_per_seed'"):
        ScenarioSettings.from_config(validate_config({"stages": {"expand": {"scenarios_per_seed": 0}}}))
