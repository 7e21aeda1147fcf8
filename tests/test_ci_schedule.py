"""How ``-n 2`` hands out the tests (tests/conftest.py): whole groups, in the order collected, the real-model
group first. pytest-xdist's own scheduler, driven here with two stand-in workers, would sort the groups by
their number of tests and hand the real-model group (few, long tests) out after the larger modules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest as suite  # not its names: test_group would be collected as a test


class Worker:
    """A stand-in for xdist's ``WorkerController``: records the test indexes it is sent."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(list(indexes))

    def shutdown(self) -> None:
        self.shutting_down = True


def first_units(nodeids: list[str]) -> tuple[list[str], list[str]]:
    """The tests of the first group each of two workers gets from the suite's scheduler."""
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True), getvalue=lambda name: ["2*popen"],
                             hook=SimpleNamespace(pytest_collectreport=lambda report: None))
    sched = suite.pytest_xdist_make_scheduler(config, SimpleNamespace(loadscopesched=lambda *a: None))  # type: ignore[arg-type]
    a, b = Worker("gw0"), Worker("gw1")
    for w in (a, b):
        sched.add_node(w)  # type: ignore[attr-defined]
    for w in (a, b):
        sched.add_node_collection(w, nodeids)  # type: ignore[attr-defined]
    sched.schedule()  # type: ignore[attr-defined]
    return [nodeids[i] for i in a.sent[0]], [nodeids[i] for i in b.sent[0]]


def test_the_real_model_group_is_handed_out_first_though_smaller() -> None:
    real = ["tests/llm/test_embedded_real.py::test_a", "tests/stages/test_expand_real.py::test_b"]
    big = [f"tests/{m}.py::test_{i}" for m in ("test_big", "test_bigger") for i in range(30)]
    ray = ["tests/executor/test_ray_run.py::test_c", "tests/executor/test_executors.py::test_d"]
    first, second = first_units(real + big + ray)  # the order tests/conftest.py collects in: real first
    assert first == real
    assert second == big[:30]  # then the next group in the collection's order, whole
    # the groups themselves: a real-model file, the Ray tests together, else the module
    assert {suite.test_group(n) for n in real} == {"real_llm"} and {suite.test_group(n) for n in ray} == {"ray"}


def test_the_suites_collection_starts_with_its_real_model_tests(request: pytest.FixtureRequest) -> None:
    """On what this session collected (the whole suite in CI): every real-model test comes first, and the first
    group handed out is exactly them."""
    nodeids = [item.nodeid for item in request.session.items]
    real = [item.nodeid for item in request.session.items if item.get_closest_marker("real_llm")]
    assert nodeids[: len(real)] == real
    if real and len(nodeids) > len(real):
        first, _ = first_units(nodeids)
        assert first == real
