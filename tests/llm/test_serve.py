"""The embedded server's thread fitting (``pipeline.llm.serve``): all cores when the machine is quiet, one thread
given up per core the rest of the machine keeps busy, never fewer than one, looked at no more often than
``LOOK_EVERY_S``; and the server process is started through it, with the fitting off when the user set a thread
count."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from pipeline.llm import serve
from pipeline.llm.embedded import server_env
from pipeline.settings import LLMSettings


class Machine:
    """Scripted clock and CPU counters: ``others`` and ``own`` cores busy per second, advanced by ``step``."""

    def __init__(self) -> None:
        self.t = 0.0
        self.machine = 0
        self.own = 0

    def step(self, seconds: float, others: float, own: float) -> None:
        self.t += seconds
        self.own += int(own * seconds * 100)
        self.machine += int((own + others) * seconds * 100)


def fitter(m: Machine, most: int = 2) -> serve.ThreadFitter:
    return serve.ThreadFitter(most, clock=lambda: m.t, machine=lambda: m.machine, own=lambda: m.own,
                              ticks_per_s=100)


def test_all_cores_while_the_machine_is_quiet() -> None:
    m = Machine()
    f = fitter(m)
    assert f.now() == 2
    for _ in range(5):
        m.step(0.5, others=0.1, own=2.0)
        assert f.now() == 2


def test_one_thread_gives_way_to_a_busy_core_and_comes_back_when_it_stops() -> None:
    m = Machine()
    f = fitter(m)
    f.now()
    m.step(0.5, others=0.67, own=1.33)  # a busy loop takes its share of the two cores
    assert f.now() == 1
    m.step(0.5, others=1.0, own=1.0)  # with one thread each has a core: still one
    assert f.now() == 1
    m.step(0.5, others=0.0, own=1.0)  # the busy loop ended
    assert f.now() == 2


def test_never_fewer_than_one_and_never_more_than_asked() -> None:
    m = Machine()
    f = fitter(m, most=4)
    f.now()
    m.step(1.0, others=9.0, own=1.0)
    assert f.now() == 1
    m.step(1.0, others=1.2, own=3.0)
    assert f.now() == 3
    m.step(1.0, others=0.0, own=3.0)
    assert f.now() == 4


def test_looks_at_most_every_look_interval() -> None:
    m = Machine()
    f = fitter(m)
    f.now()
    m.step(serve.LOOK_EVERY_S / 5, others=2.0, own=0.0)
    assert f.now() == 2  # too soon to look again
    m.step(serve.LOOK_EVERY_S, others=2.0, own=0.0)
    assert f.now() == 1


def test_fit_threads_sets_the_context_threads_before_a_decode_only_when_they_change(monkeypatch: Any) -> None:
    calls: list[tuple[int, int]] = []
    evals: list[list[int]] = []

    class Ctx:
        def set_n_threads(self, n: int, nb: int) -> None:
            calls.append((n, nb))

    class Llama:
        def __init__(self) -> None:
            self._ctx = Ctx()

        def eval(self, tokens: list[int]) -> None:
            evals.append(tokens)

    answers = iter([2, 2, 1, 1, 2])
    monkeypatch.setattr(serve.ThreadFitter, "now", lambda self: next(answers))
    serve.fit_threads(Llama, 2)
    llama = Llama()
    for i in range(5):
        llama.eval([i])
    assert evals == [[0], [1], [2], [3], [4]]
    assert calls == [(2, 2), (1, 1), (2, 2)]


def test_a_thread_count_the_user_set_is_kept_fixed(monkeypatch: Any) -> None:
    monkeypatch.delenv("ENVFOUNDRY_ADAPTIVE_THREADS", raising=False)
    assert "ENVFOUNDRY_ADAPTIVE_THREADS" not in server_env(LLMSettings())
    assert server_env(LLMSettings(threads=2))["ENVFOUNDRY_ADAPTIVE_THREADS"] == "0"


def test_threads_are_fitted_when_the_priority_could_not_be_raised() -> None:
    assert serve.should_fit("auto", raised=False) and not serve.should_fit("auto", raised=True)
    assert serve.should_fit("1", raised=True) and not serve.should_fit("0", raised=False)
    with pytest.raises(SystemExit, match="ENVFOUNDRY_ADAPTIVE_THREADS='yes'"):
        serve.should_fit("yes", raised=False)


def test_raising_the_priority_says_what_happened(monkeypatch: Any) -> None:
    state = {"nice": 0}
    monkeypatch.setattr(serve.os, "getpriority", lambda which, who: state["nice"])

    def refuse(which: int, who: int, value: int) -> None:
        raise PermissionError

    monkeypatch.setattr(serve.os, "setpriority", refuse)
    assert serve.raise_priority(-10) == (False, "priority: nice 0 (nice -10 is not allowed for this user)")
    monkeypatch.setattr(serve.os, "setpriority", lambda which, who, value: state.update(nice=value))
    monkeypatch.setattr(serve, "own_autogroup", lambda nice: f", its own session's group at nice {nice}")
    assert serve.raise_priority(-10) == (True, "priority: nice -10, its own session's group at nice -10")
    assert serve.raise_priority(0) == (True, "priority: nice -10 (left as it is)")


def test_a_raised_server_leads_its_own_session_whose_group_has_its_nice() -> None:
    """With the kernel's autogroups on, nice weighs only within a session: the server must be its own session with
    the group's nice set, or a test run in another terminal takes half the CPU whatever the server's nice."""
    code = ("import os; from pipeline.llm import serve; print(serve.raise_priority(-3)); "
            "print(os.getsid(0) == os.getpid()); print(open('/proc/self/autogroup').read().strip())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    raised, leader, group = out.stdout.splitlines()
    if os.geteuid() != 0:  # an ordinary user cannot raise priority: nothing else changes
        assert raised.startswith("(False") and leader == "False"
        return
    if serve.AUTOGROUP.read_text().strip() == "1":
        assert raised == "(True, \"priority: nice -3, its own session's group at nice -3\")"
        assert leader == "True" and group.endswith("nice -3")
    else:
        assert raised == "(True, 'priority: nice -3')"


def test_machine_counters_read_from_proc() -> None:
    busy, own = serve._machine_busy_ticks(), serve._own_ticks()
    assert busy is not None and own is not None and busy >= own >= 0


class PrefixLlama:
    """llama-cpp-python's ``Llama`` as far as prompt reading goes: it keeps the last request's tokens and evaluates
    only what follows the longest shared prefix, then one token per generated token."""

    def __init__(self) -> None:
        self.kept: list[int] = []
        self.evaluated: list[list[int]] = []

    def eval(self, tokens: list[int]) -> None:
        self.evaluated.append(list(tokens))
        self.kept += tokens

    def generate(self, tokens: list[int]) -> Any:
        shared = 0
        for a, b in zip(self.kept, tokens, strict=False):
            if a != b:
                break
            shared += 1
        self.kept = self.kept[:shared]
        todo = tokens[shared:]
        for i in range(3):
            self.eval(todo)
            todo = [100 + i]
            yield 100 + i

    def create_chat_completion(self, prompt: list[int], stream: bool = False) -> Any:
        out = list(self.generate(prompt))
        if stream:
            return iter([{"chunk": out}])
        return {"choices": [{"message": {"content": str(out)}}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(out)}}


def test_the_server_says_how_much_of_each_prompt_it_read() -> None:
    """Issue 42: each reply carries llama.cpp's ``timings`` (``prompt_n`` read, ``cache_n`` served from the prefix
    the previous request left), what is generated unchanged."""

    class Llama(PrefixLlama):
        pass

    serve.count_prompt_reads(Llama)
    llm = Llama()
    first = llm.create_chat_completion(list(range(50)))
    assert first["timings"] == {"prompt_n": 50, "cache_n": 0}
    assert first["choices"] == PrefixLlama().create_chat_completion(list(range(50)))["choices"]
    second = llm.create_chat_completion([*range(50), 100, 101, 7, 8])  # the last turn and its reply, then more
    assert second["timings"] == {"prompt_n": 2, "cache_n": 52}
    other = llm.create_chat_completion([9, *range(10)])
    assert other["timings"] == {"prompt_n": 11, "cache_n": 0}
    assert "timings" not in str(list(llm.create_chat_completion([1], stream=True)))


def test_the_servers_chat_route_keeps_the_timings() -> None:
    """llama-cpp-python's chat route validates replies against a TypedDict that drops keys it does not name:
    :func:`pipeline.llm.serve.keep_timings` (as the server starts) lets ``timings`` through, in a process of its own."""
    pytest.importorskip("llama_cpp")
    code = """
import llama_cpp, pydantic
from pipeline.llm.serve import keep_timings
keep_timings(llama_cpp)
from llama_cpp.server import app
route = [r for r in app.router.routes if getattr(r, "path", "") == "/v1/chat/completions"][0]
reply = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0,
         "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop", "logprobs": None}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
ta = pydantic.TypeAdapter(route.response_model)
print(ta.dump_python(ta.validate_python({**reply, "timings": {"prompt_n": 1, "cache_n": 2}}))["timings"])
print("timings" in ta.dump_python(ta.validate_python(reply)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["{'prompt_n': 1, 'cache_n': 2}", "False"]


def test_the_prompt_cache_counts_the_logits_its_states_copy() -> None:
    """llama-cpp-python's RAM cache counted only the KV bytes of a saved prompt; its logits (up to 311 MB a state
    here) grew the server to 7.7 GB under a 128 MiB cap. Counted whole, a cap of three states' real size keeps three."""
    import numpy as np
    from llama_cpp.llama import LlamaState
    from llama_cpp.llama_cache import LlamaRAMCache

    def state(n: int) -> LlamaState:
        return LlamaState(input_ids=np.zeros(8, dtype=np.intc), scores=np.zeros((8, 1000), dtype=np.single),
                          n_tokens=n, llama_state=b"x" * 100, llama_state_size=100, seed=0)

    whole = 100 + 8 * 1000 * 4 + 8 * np.dtype(np.intc).itemsize
    original = LlamaRAMCache.cache_size
    try:
        serve.count_whole_states(LlamaRAMCache)
        cache = LlamaRAMCache(capacity_bytes=3 * whole)
        for n in range(5):
            cache[(n, 1, 2)] = state(n)
        assert cache.cache_size == 3 * whole
        assert [k[0] for k in cache.cache_state] == [2, 3, 4]  # the oldest went first
    finally:
        LlamaRAMCache.cache_size = original
