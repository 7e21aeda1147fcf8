"""Looking at a catalog: a self-contained HTML report and a local browser, both over one loader.

``load_catalog`` reads a catalog directory into plain dicts; ``write_report`` renders them into one HTML
file (plots are deterministic matplotlib SVG); ``create_app`` serves them as a FastAPI app.
"""

from pipeline.report.browse import create_app
from pipeline.report.bundle import ReportError, render_report, write_report
from pipeline.report.data import load_catalog, normalize_task

__all__ = ["ReportError", "create_app", "load_catalog", "normalize_task", "render_report", "write_report"]
