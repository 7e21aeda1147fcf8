"""The report and the browser as a person sees them: Debian's headless Chromium opens the report file and
pages served by ``envfoundry browse`` on loopback, takes screenshots and dumps the DOM after scripts ran.

Checks: the screenshot is not blank (many colours, a good share of non-background pixels, the plots'
colours present), key text is in the rendered DOM, and the browser logged no console message at all
(a script error, a blocked fetch or a failed resource load would each log one).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from pipeline.report.bundle import write_report
from tests.report.catalog_factory import XSS, clinic_env

CHROMIUM = shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def need_chromium() -> None:
    if CHROMIUM is None:  # a missing install step must fail, not skip
        pytest.fail("chromium is not installed: run scripts/setup.sh (it installs Debian's chromium package)")


@dataclass
class Shot:
    dom: str
    image: np.ndarray
    console: list[str]


def open_page(url: str, tmp: Path, name: str, size: tuple[int, int] = (1280, 1800)) -> Shot:
    png = tmp / f"{name}.png"
    cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp / ('profile-' + name)}", f"--screenshot={png}",
           "--dump-dom", f"--window-size={size[0]},{size[1]}", url]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    return Shot(res.stdout, np.asarray(Image.open(png).convert("RGB")), console)


def assert_not_blank(shot: Shot, *, colours: int = 40, ink: float = 0.04) -> None:
    img = shot.image
    distinct = len(np.unique(img.reshape(-1, 3), axis=0))
    background = np.array([246, 247, 249])  # the page background (--bg)
    non_bg = float(np.mean(np.any(np.abs(img.astype(int) - background) > 12, axis=2)))
    assert distinct >= colours, f"only {distinct} distinct colours: the page looks blank"
    assert non_bg >= ink, f"only {non_bg:.1%} of the pixels differ from the background"


def has_colour(img: np.ndarray, rgb: tuple[int, int, int], at_least: int = 200, tol: int = 10) -> bool:
    return int(np.sum(np.all(np.abs(img.astype(int) - np.array(rgb)) <= tol, axis=2))) >= at_least


def test_report_in_chromium(rich_catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    write_report(rich_catalog, out)
    shot = open_page(out.as_uri(), tmp_path, "report", (1280, 3400))
    assert shot.console == [], shot.console
    assert_not_blank(shot, colours=200, ink=0.08)
    for rgb in ((0x4C, 0x78, 0xA8), (0xF5, 0x85, 0x18), (0x54, 0xA2, 0x4B)):  # the plots' bars and points
        assert has_colour(shot.image, rgb), rgb
    dom = shot.dom
    for text in ("Catalog report: demo", "Seeds → scenarios", "Pass-rate histogram", "Clinic Appointment Desk",
                 "7 of 7 tasks"):
        assert text in dom, text
    # the task table was filled by the script, LLM text landed as text, and nothing it holds ran
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert XSS not in dom
    assert re.search(r"<title>envfoundry report: demo</title>", dom)
    assert dom.count("<script") == 2


@pytest.fixture(scope="module")
def served(rich_catalog: Path) -> Iterator[str]:
    """``envfoundry browse`` (the real CLI) on a free loopback port; stopped after the module."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "browse", str(rich_catalog), "--port", str(port),
                             "--no-embed"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"browse exited with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
            if time.monotonic() > deadline:
                pytest.fail("browse did not answer /health within 60 s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_browse_pages_in_chromium(served: str, tmp_path: Path) -> None:
    env_id = clinic_env().env_id
    pages = {
        "index": ("/", ("Catalog demo", "Clinic Appointment Desk", "Book Lending System", "environments verified")),
        "env": (f"/env/{env_id}", ("Schema", "appointments", "book_appointment", "INSERT INTO appointments")),
        "task": ("/task/t_clinic_rebook", ("Reference solution, replayed", "booked → cancelled", "holds", "tier 3",
                                           "Tester trajectories (0)")),
        "tasks": ("/tasks?kind=lookup", ("3 of 7 tasks", "3 shown", "How many doctors practise cardiology?")),
    }
    shots = {}
    for name, (path, texts) in pages.items():
        shot = open_page(served + path, tmp_path, name)
        assert shot.console == [], (name, shot.console)
        assert_not_blank(shot)
        for text in texts:
            assert text in shot.dom, (name, text)
        shots[name] = shot
    # the schema diagram is drawn: three table boxes and two foreign-key curves in the rendered page
    env_dom = shots["env"].dom
    assert env_dom.count('class="table"') == 3 and env_dom.count('class="fk"') == 2
    assert has_colour(shots["env"].image, (0x1D, 0x24, 0x33), at_least=2000)  # dark table headers
    # the live filter ran: typing is simulated by the server-side filter; the count line was written by JS
    assert re.search(r'<span id="shown">3 shown</span>', shots["tasks"].dom)


def test_browse_refuses_a_foreign_host(served: str) -> None:
    r = httpx.get(f"{served}/", headers={"Host": "attacker.example"})
    assert r.status_code == 403
    assert httpx.get(f"{served}/").status_code == 200


def test_the_console_check_sees_script_errors_and_blocked_fetches(tmp_path: Path) -> None:
    """Control: the same page shell with a failing script and a network fetch logs what the checks look for."""
    from pipeline.report.html import page

    bad = tmp_path / "bad.html"
    bad.write_text(page("bad", "<p>x</p>", script="<script>fetch('http://127.0.0.1:9/x'); missing();</script>"),
                   encoding="utf-8")
    shot = open_page(bad.as_uri(), tmp_path, "bad", (400, 300))
    text = "\n".join(shot.console)
    assert "Uncaught ReferenceError: missing is not defined" in text
    assert "Content Security Policy" in text  # the page's CSP refuses any fetch, and says so
