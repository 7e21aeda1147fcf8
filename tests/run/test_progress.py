"""Batch jobs log to files: without a terminal the run prints plain timestamped lines instead of rich bars."""

from __future__ import annotations

import io
import re

from rich.console import Console

from pipeline.cli.run import LogProgress


def test_log_progress_prints_one_plain_line_per_event():
    buf = io.StringIO()
    console = Console(file=buf, width=80)
    assert not console.is_terminal
    with LogProgress(console) as prog:
        prog.stage("environments", 2)
        prog.message("Library lending: tools (3 of 6 written) and a long tail that must not be wrapped " * 2)
        prog.advance("environments", 1, "Library lending: verified")
        prog.tokens(10, 1.0)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert all(re.match(r"\[\s*\d+\.\ds\] ", line) for line in lines)
    assert lines[0].endswith("environments: 2 to do")
    assert "must not be wrapped" in lines[1] and "\x1b" not in buf.getvalue()
    assert lines[2].endswith("environments: 1/2  Library lending: verified")
