"""The report's and the browser's page templates (Jinja2, autoescaped; package data, see ``pipeline.report.html``)."""
