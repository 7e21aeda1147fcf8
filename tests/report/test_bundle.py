"""``envfoundry report``: escaping, determinism, where it may write, what it shows."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.report.bundle import ReportError, write_report
from pipeline.report.data import load_catalog
from pipeline.report.html import script_json
from pipeline.report.plots import pca_2d
from pipeline.report.scenario_map import map_points
from tests.report.catalog_factory import DUPLICATE, UNSUITABLE, XSS, XSS_TITLE
from tests.report.conftest import tree_digest


class Scripts(HTMLParser):
    """Collects <script> elements (attributes and text) and every URL-bearing attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.urls: list[str] = []
        self._in: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._in = dict(attrs)
            self.scripts.append((self._in, ""))
        self.urls += [v for k, v in attrs if k in ("src", "href", "xlink:href") and v and not v.startswith("#")]

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None


def test_script_json_cannot_close_the_script_element() -> None:
    text = script_json({"a": XSS, "b": "<!-- x -->", "c": "a\u2028b\u2029c", "d": "&amp;"})
    assert "</" not in text and "<!--" not in text and "<" not in text and ">" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == {"a": XSS, "b": "<!-- x -->", "c": "a\u2028b\u2029c", "d": "&amp;"}


@pytest.fixture(scope="module")
def report_html(rich_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report(rich_catalog, out)
    return out.read_text(encoding="utf-8")


def test_llm_text_cannot_break_out_of_the_page(report_html: str) -> None:
    parser = Scripts()
    parser.feed(report_html)
    # exactly the two scripts the page ships: the data island and the task table
    assert [a.get("type") for a, _ in parser.scripts] == ["application/json", None]
    data = json.loads(parser.scripts[0][1])
    instructions = [t["instruction"] for t in data["tasks"]]
    assert any(i.endswith(XSS) for i in instructions) and any(XSS_TITLE in i for i in instructions)
    assert XSS not in report_html  # neither in the data island nor in the markup (rejected env's reason)
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in report_html


def test_report_is_self_contained(report_html: str) -> None:
    parser = Scripts()
    parser.feed(report_html)
    assert parser.urls == []  # no stylesheet, script, font or image is fetched
    assert not re.search(r"https?://(?!www\.w3\.org/)", report_html.replace("http://www.w3.org", ""))
    assert "@import" not in report_html and "url(http" not in report_html


def test_report_shows_every_part(report_html: str) -> None:
    for text in ("Seeds → scenarios", "Rejections by stage and reason", "Tools and tasks per environment",
                 "Task kinds and tiers", "Pass-rate histogram", "Tokens per stage", "Seconds per stage",
                 "Clinic Appointment Desk", "Book Lending System", DUPLICATE.name, UNSUITABLE.name,
                 "tier 1", "tier 3", "no tier", "seed_data", "duplicate", "unsuitable"):
        assert text in report_html, text
    assert report_html.count("<svg ") >= 6
    assert 'id="scenario-map-' in report_html and 'id="usage-' in report_html  # ids prefixed per figure


def test_same_catalog_same_bytes(rich_catalog: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    write_report(rich_catalog, a)
    write_report(rich_catalog, b)
    assert a.read_bytes() == b.read_bytes()


def test_refuses_inside_the_catalog_and_over_a_file(rich_catalog: Path, tmp_path: Path) -> None:
    before = tree_digest(rich_catalog)
    with pytest.raises(ReportError, match="outside the catalog"):
        write_report(rich_catalog, rich_catalog / "report.html")
    with pytest.raises(ReportError, match="outside the catalog"):
        write_report(rich_catalog, rich_catalog / "envs" / "x.html", force=True)
    out = tmp_path / "r.html"
    out.write_text("keep me", encoding="utf-8")
    with pytest.raises(ReportError, match="already exists; pass --force"):
        write_report(rich_catalog, out)
    assert out.read_text(encoding="utf-8") == "keep me"
    write_report(rich_catalog, out, force=True, embed=False)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert tree_digest(rich_catalog) == before


def test_cli_report_and_help(example: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "q.html"
    res = runner.invoke(main, ["report", str(example), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output and out.stat().st_size > 20_000
    res = runner.invoke(main, ["report", str(example), "--out", str(out)])
    assert res.exit_code == 2 and "already exists; pass --force" in res.output
    res = runner.invoke(main, ["report", str(example), "--out", str(example / "r.html"), "--force"])
    assert res.exit_code == 2 and "outside the catalog" in res.output
    for cmd in ("report", "browse"):
        res = runner.invoke(main, [cmd, "--help"])
        assert res.exit_code == 0 and "CATALOG" in res.output


def test_map_places_rejected_scenarios_next_to_what_dedup_saw(rich_catalog: Path) -> None:
    data = load_catalog(rich_catalog)
    points, note = map_points(data, rich_catalog)
    by_name = {p["name"]: p for p in points}
    assert {p["status"] for p in points} == {"kept", "duplicate", "unsuitable"}
    dup = by_name[DUPLICATE.name]
    assert points[dup["match"]]["name"] == "Book Lending System"
    # the near-duplicate lies closer to its original than the clinic does
    def dist(a: dict, b: dict) -> float:
        return float(np.hypot(a["x"] - b["x"], a["y"] - b["y"]))
    assert dist(dup, by_name["Book Lending System"]) < dist(by_name["Clinic Appointment Desk"], by_name["Book Lending System"])
    assert "5 scenarios on the map" in note
    points, note = map_points(data, rich_catalog, embed=False)
    assert len(points) == 3 and "2 rejected scenarios are not placed" in note


def test_pca_is_deterministic_and_sign_fixed() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5))
    a = pca_2d(x)
    assert np.array_equal(a, pca_2d(x.copy()))
    b = pca_2d(-x)  # the same cloud mirrored: the fixed signs make it come out mirrored
    assert np.allclose(a, -b, atol=1e-5)
    assert pca_2d(x[:1]).tolist() == [[0.0, 0.0]]
