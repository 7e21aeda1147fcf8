"""The shared ask -> check -> feed-back loop: hard errors, acceptable-but-improvable replies, repeats."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.llm.fake import fake_client
from pipeline.stages.feedback import ask_with_feedback, user


class Reply(BaseModel):
    n: int


def check(reply: Reply) -> tuple[int | None, str | None]:
    if reply.n < 0:
        return None, "n must not be negative"
    if reply.n < 10:
        return reply.n, "n could be larger"  # acceptable, but ask for better
    return reply.n, None


def ask(replies: list[dict], attempts: int = 3):
    client = fake_client(replies)
    out = ask_with_feedback(client, Reply, user("give n"), check, stage="t", max_attempts=attempts,
                            max_tokens=20, feedback=lambda e: f"fix: {e}")
    return out, client


def test_an_error_is_fed_back_and_a_good_reply_ends_the_loop():
    out, client = ask([{"n": -1}, {"n": 12}])
    assert (out.value, out.error, out.attempts) == (12, None, 2)
    assert client.requests[1][-1]["content"] == "fix: n must not be negative"


def test_a_hard_error_to_the_end_gives_up_with_it():
    out, _ = ask([{"n": -1}, {"n": -2}, {"n": -3}])
    assert out.value is None and out.error == "n must not be negative"


def test_an_acceptable_reply_is_improved_when_possible():
    out, client = ask([{"n": 3}, {"n": 11}])
    assert (out.value, out.error) == (11, None)
    assert client.requests[1][-1]["content"] == "fix: n could be larger"


def test_an_acceptable_reply_is_kept_when_the_model_repeats_it_or_attempts_run_out():
    out, client = ask([{"n": 3}, {"n": 3}])
    assert (out.value, out.error, out.attempts) == (3, None, 2) and len(client.requests) == 2
    out, _ = ask([{"n": 3}, {"n": -1}, {"n": 4}])
    assert (out.value, out.error) == (4, None)  # the latest acceptable one
    out, _ = ask([{"n": 3}, {"n": -1}, {"n": -1}])
    assert (out.value, out.error) == (3, None)


def test_a_repeated_bad_reply_ends_the_loop_early():
    out, client = ask([{"n": -1}, {"n": -1}, {"n": 50}])
    assert out.value is None and "repeated its previous reply" in out.error and len(client.requests) == 2


def test_retries_are_seeded_samples_when_a_retry_temperature_is_set():
    client = fake_client([{"n": -1}, {"n": -2}, {"n": 12}])
    out = ask_with_feedback(client, Reply, user("give n"), check, stage="t", max_attempts=3, max_tokens=20,
                            feedback=lambda e: f"fix: {e}", retry_temperature=0.7)
    assert out.value == 12
    assert [(b["temperature"], b["seed"]) for b in client.bodies] == [(0.0, 0), (0.7, 1), (0.7, 2)]


def test_a_sampled_reply_identical_to_an_earlier_one_is_not_an_attempt():
    """Seen on a permit office: three repair replies came back identical, and the tool was lost. A repeat is
    asked again hotter, with a note that it was the same; only different replies count as attempts."""
    client = fake_client([{"n": -1}, {"n": -1}, {"n": -1}, {"n": 12}])
    out = ask_with_feedback(client, Reply, user("give n"), check, stage="t", max_attempts=2, max_tokens=20,
                            feedback=lambda e: f"fix: {e}", retry_temperature=0.7)
    assert out.value is None and out.attempts == 2 and len(client.requests) == 3  # 1 repeat was free
    assert [b["temperature"] for b in client.bodies] == [0.0, 0.7, 1.0]
    assert "was the same as an earlier one" in client.requests[2][-1]["content"]
    assert client.requests[2][-1]["content"].startswith("fix: ")
    client = fake_client([{"n": -1}, {"n": -1}, {"n": 12}])
    out = ask_with_feedback(client, Reply, user("give n"), check, stage="t", max_attempts=2, max_tokens=20,
                            feedback=lambda e: f"fix: {e}", retry_temperature=0.7)
    assert out.value == 12 and out.attempts == 2
