"""The embedded server's process: llama-cpp-python's OpenAI-compatible server, started so that it keeps its speed
when other work shares the machine.

``python -m pipeline.llm.serve [llama_cpp.server arguments]`` (started by ``pipeline.llm.embedded``). With
``--n_threads N`` set to the cores of the machine, llama.cpp splits every op over N threads that meet at a
barrier; when another process takes one core, one thread is descheduled and the others spin at the barrier
waiting for it: measured 0.26-0.33x of the quiet speed beside one busy loop (issue 42,
``benchmarks/results/embedded.md``). Two remedies, the first where the system allows it:

* a higher scheduling priority (``ENVFOUNDRY_SERVER_NICE``, default -19; llama.cpp's own server has ``--prio``
  for the same reason): a pipeline waits on its model, so a test worker or a compiler beside it yields its core
  first. Allowed for root or with CAP_SYS_NICE. Measured 0.74x beside a busy loop in the server's own session,
  quiet speed unchanged. Where the kernel groups tasks by session (autogroups) the server leads a session of its
  own and gives its group the same nice (:func:`own_autogroup`); a group's weight at nice -10 is ~9x a usual
  session's, so beside eight busy sessions the server would have about half the CPU and its two threads would
  spin at barriers again (seen 2026-11-28: 5 tokens/s at -10, 6.8-8.3 at -19, against 1.1 with no group of its
  own, under a load of 5-47): hence -19.
* otherwise, threads fitted to the free cores: before each decode (one batch of the prompt, or one generated
  token) the server looks at how much CPU the rest of the machine used since it last looked (``/proc/stat``
  minus this process's own ``/proc/self/stat``) and asks llama.cpp for the cores left free (at least one, at
  most N): quiet, all N; beside a busy process, one thread that keeps its core. Measured 0.55-0.57x (one thread
  quiet is ~0.55x of two here, so that is near the limit), quiet speed unchanged.

A ggml matrix product computes each output element in one thread whatever their number, so greedy replies are
the same bytes at any thread count or priority (checked by ``benchmarks/bench_embedded.py``).

``ENVFOUNDRY_ADAPTIVE_THREADS``: ``auto`` (default: fit when the priority could not be raised), ``1`` (always
fit), ``0`` (never: llama.cpp's fixed ``--n_threads``; also when ``llm.threads`` is set).
``ENVFOUNDRY_SERVER_NICE=0`` keeps the usual priority.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: seconds between two looks at the machine's load (a generated token takes ~0.1 s here)
LOOK_EVERY_S = 0.25
#: cores the rest of the machine must keep busy before this server gives one of its threads up
BUSY_CORE = 0.5

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_ticks() -> int | None:
    """Jiffies every CPU spent on anything but idle and iowait since boot (None where /proc is absent)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    values = [int(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    guest = sum(values[8:10]) if len(values) > 9 else 0  # guest time is counted in user time already
    return sum(values) - idle - guest


def _own_ticks() -> int | None:
    try:
        text = Path("/proc/self/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of stat(5))


class ThreadFitter:
    """Threads to use now: the cores the rest of the machine left free over the last look, in [1, most]."""

    def __init__(self, most: int, clock: Callable[[], float] = time.monotonic,
                 machine: Callable[[], int | None] = _machine_busy_ticks,
                 own: Callable[[], int | None] = _own_ticks, ticks_per_s: float = _TICKS):
        self.most = max(1, most)
        self._clock, self._machine, self._own, self._hz = clock, machine, own, ticks_per_s
        self._last: tuple[float, int, int] | None = None
        self.threads = self.most

    def now(self) -> int:
        t = self._clock()
        if self._last is not None and t - self._last[0] < LOOK_EVERY_S:
            return self.threads
        machine, own = self._machine(), self._own()
        if machine is None or own is None:
            return self.threads
        if self._last is not None:
            seconds = t - self._last[0]
            others = ((machine - self._last[1]) - (own - self._last[2])) / self._hz / seconds
            taken = max(1, round(others)) if others >= BUSY_CORE else 0
            self.threads = min(self.most, max(1, self.most - taken))
        self._last = (t, machine, own)
        return self.threads


def fit_threads(llama_class: Any, most: int) -> None:
    """Make every ``llama_class`` instance pick its thread count before each decode."""
    fitter = ThreadFitter(most)
    original = llama_class.eval
    state: dict[int, int] = {}

    def eval(self: Any, tokens: Any) -> Any:
        n = fitter.now()
        if state.get(id(self)) != n:
            self._ctx.set_n_threads(n, n)
            state[id(self)] = n
        return original(self, tokens)

    llama_class.eval = eval


def count_prompt_reads(llama_class: Any) -> None:
    """Make every ``llama_class`` chat reply say how much of its prompt was read and how much its prefix cache served,
    as llama.cpp's own server does (``timings``: ``prompt_n`` tokens read, ``cache_n`` served from the cache; issue
    42). llama-cpp-python keeps the previous request's tokens and reads only what follows the longest shared prefix
    (or loads a longer one from its RAM cache): the first ``eval`` of a ``generate`` is that prompt suffix, every later
    one a generated token. Counting changes nothing of what is generated."""
    original_eval, original_generate = llama_class.eval, llama_class.generate
    original_chat = llama_class.create_chat_completion

    def eval(self: Any, tokens: Any) -> Any:
        if getattr(self, "_ef_first_eval", False):
            self._ef_first_eval = False
            self._ef_prompt_n = len(tokens)
        return original_eval(self, tokens)

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._ef_first_eval, self._ef_prompt_n = True, None
        yield from original_generate(self, *args, **kwargs)

    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._ef_prompt_n = None
        out = original_chat(self, *args, **kwargs)
        read = getattr(self, "_ef_prompt_n", None)
        if isinstance(out, dict) and read is not None:  # a stream's chunks are left as they are
            prompt = int((out.get("usage") or {}).get("prompt_tokens", read))
            out["timings"] = {"prompt_n": read, "cache_n": max(0, prompt - read)}
        return out

    llama_class.eval, llama_class.generate = eval, generate
    llama_class.create_chat_completion = create_chat_completion


def keep_timings(llama_cpp: Any) -> None:
    """Let the server's replies carry ``timings``: its chat route validates replies against ``llama_cpp.ChatCompletion``,
    a TypedDict that drops keys it does not name. Call before ``llama_cpp.server.app`` is imported."""
    from typing import NotRequired

    from typing_extensions import TypedDict, get_type_hints  # pydantic wants this TypedDict before 3.12

    base = llama_cpp.llama_types.CreateChatCompletionResponse
    Timings = TypedDict("Timings", {"prompt_n": int, "cache_n": int})  # noqa: UP013, N806
    fields = {**get_type_hints(base, include_extras=True), "timings": NotRequired[Timings]}
    TimedChatCompletion = TypedDict("TimedChatCompletion", fields)  # type: ignore[misc]  # noqa: UP013, N806
    llama_cpp.ChatCompletion = TimedChatCompletion


def raise_priority(nice: int) -> tuple[bool, str]:
    """Set this process's nice value to ``nice`` (before any thread is started, so llama.cpp's threads inherit
    it): whether it is now above the usual priority, and what happened in words for the server log."""
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if nice >= now:
        return now < 0, f"priority: nice {now} (left as it is)"
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        return now < 0, f"priority: nice {now} (nice {nice} is not allowed for this user)"
    return True, f"priority: nice {nice}{own_autogroup(nice)}"


AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


def own_autogroup(nice: int) -> str:
    """Where the kernel groups tasks by session (``sched_autogroup_enabled``), a nice value only weighs against
    the process's own session: a test run or a build in another terminal shares the CPU with the server's whole
    session as one equal peer, whatever the server's nice (measured 2026-11-28: 1.1 tokens/s at nice -10 beside
    four busy sessions). So the server starts a session of its own and gives that group the same nice value.
    Returns the words for the server log ("" where autogroups are off). ``ENVFOUNDRY_SERVER_AUTOGROUP=0`` leaves
    the session as it is (for measuring the difference: ``benchmarks/bench_embedded.py``)."""
    if os.environ.get("ENVFOUNDRY_SERVER_AUTOGROUP", "1") == "0":
        return " (its session's group left as it is: ENVFOUNDRY_SERVER_AUTOGROUP=0)"
    try:
        if AUTOGROUP.read_text().strip() != "1":
            return ""
    except OSError:
        return ""
    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError as e:
        return f" (its session's group left at the usual weight: {e})"
    return f", its own session's group at nice {nice}"


def count_whole_states(cache_class: Any) -> None:
    """Make ``cache_class`` (llama-cpp-python's ``LlamaRAMCache``) count what its saved prompts really hold.

    It counts only each state's KV bytes (``llama_state_size``, 10-40 MB here) against its capacity, but a saved state
    also copies the logits of every evaluated token of the last batch (``scores``: up to n_batch x 151,936 floats,
    311 MB) and the prompt's token ids; so a 128 MiB cache held 3-12 states and the server grew to 5.2-7.7 GB (four
    servers of one session on this 24 GiB machine: two were OOM-killed, 2026-11-30 seventeenth). Counting the whole
    state bounds the cache by real memory; which prompts it keeps changes nothing of what is generated."""

    def cache_size(self: Any) -> int:
        return sum(int(s.llama_state_size) + int(getattr(s.scores, "nbytes", 0)) + int(getattr(s.input_ids, "nbytes", 0))
                   for s in self.cache_state.values())

    cache_class.cache_size = property(cache_size)


def should_fit(mode: str, raised: bool) -> bool:
    """Fit the threads to the free cores? ``mode`` is ``ENVFOUNDRY_ADAPTIVE_THREADS``."""
    if mode not in ("auto", "0", "1"):
        raise SystemExit(f"ENVFOUNDRY_ADAPTIVE_THREADS={mode!r}: expected auto, 0 or 1")
    return mode == "1" or (mode == "auto" and not raised)


def main() -> None:  # pragma: no cover - the server process (exercised by the embedded-model tests)
    import sys

    raised, said = raise_priority(int(os.environ.get("ENVFOUNDRY_SERVER_NICE", "-19")))
    fit = should_fit(os.environ.get("ENVFOUNDRY_ADAPTIVE_THREADS", "auto"), raised)
    print(f"envfoundry: {said}; threads {'fitted to the free cores' if fit else 'fixed'}", flush=True)
    import llama_cpp
    from llama_cpp.llama import Llama

    keep_timings(llama_cpp)
    count_prompt_reads(Llama)
    count_whole_states(llama_cpp.LlamaRAMCache)
    from llama_cpp.server.__main__ import main as serve

    if fit:
        args = sys.argv[1:]
        most = int(args[args.index("--n_threads") + 1]) if "--n_threads" in args else (os.cpu_count() or 1)
        fit_threads(Llama, most)
    serve()


if __name__ == "__main__":  # pragma: no cover
    main()
