"""An environment's schema as an entity-relationship diagram: inline SVG drawn from its tables and foreign
keys (no diagram library, nothing fetched). Referenced tables stand left of the tables that refer to them;
each foreign key is a curve from the referring column to the referenced one, ending in an arrow."""

from __future__ import annotations

from typing import Any

from pipeline.report.html import esc, plural

ROW = 18
HEAD = 24
GAP_X = 70
GAP_Y = 22
PAD = 12
CHAR = 6.6


def _levels(tables: list[dict[str, Any]]) -> dict[str, int]:
    names = {t["name"] for t in tables}
    parents = {t["name"]: {fk["table"] for fk in t["foreign_keys"] if fk["table"] in names and fk["table"] != t["name"]}
               for t in tables}
    level = dict.fromkeys(names, 0)
    for _ in range(len(names)):  # longest path, bounded (a cycle stops growing after len(names) rounds)
        changed = False
        for n, ps in parents.items():
            want = max((level[p] + 1 for p in ps), default=0)
            if want > level[n] and want < len(names):
                level[n], changed = want, True
        if not changed:
            break
    return level


def schema_svg(tables: list[dict[str, Any]]) -> str:
    """The diagram of ``tables`` (as :func:`pipeline.report.data.schema_of` returns them)."""
    if not tables:
        return '<p class="muted">no tables</p>'
    level = _levels(tables)
    width = {t["name"]: max(150, int(CHAR * max([len(t["name"]) + 2] + [len(c["name"]) + len(c["type"]) + 6
                                                                      for c in t["columns"]])) + 2 * PAD)
             for t in tables}
    columns: dict[int, list[dict[str, Any]]] = {}
    for t in tables:
        columns.setdefault(level[t["name"]], []).append(t)
    col_w = {lv: max(width[t["name"]] for t in ts) for lv, ts in columns.items()}
    box: dict[str, tuple[float, float, float, float]] = {}
    x = PAD
    total_h = 0.0
    for lv in sorted(columns):
        y = PAD
        for t in columns[lv]:
            h = HEAD + ROW * max(1, len(t["columns"])) + 6
            box[t["name"]] = (x, y, col_w[lv], h)
            y += h + GAP_Y
        total_h = max(total_h, y)
        x += col_w[lv] + GAP_X
    total_w = x - GAP_X + PAD + 50

    def row_y(table: str, column: str) -> float:
        bx, by, _, _ = box[table]
        names = [c["name"] for c in next(t for t in tables if t["name"] == table)["columns"]]
        i = names.index(column) if column in names else 0
        return by + HEAD + ROW * i + ROW / 2 + 2

    parts = [f'<svg class="schema" role="img" aria-label="schema diagram" xmlns="http://www.w3.org/2000/svg" '
             f'width="{total_w:.0f}" height="{total_h:.0f}" viewBox="0 0 {total_w:.0f} {total_h:.0f}" '
             'font-family="DejaVu Sans, sans-serif" font-size="11">',
             '<defs><marker id="fk-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#2f5fa7"/></marker></defs>']
    fk_cols = {(t["name"], fk["column"]) for t in tables for fk in t["foreign_keys"]}
    for t in tables:
        bx, by, bw, bh = box[t["name"]]
        parts.append(f'<g class="table" data-table="{esc(t["name"])}">'
                     f'<rect x="{bx}" y="{by}" width="{bw}" height="{bh}" rx="5" fill="#fff" stroke="#8a94a6"/>'
                     f'<rect x="{bx}" y="{by}" width="{bw}" height="{HEAD}" rx="5" fill="#1d2433"/>'
                     f'<text x="{bx + PAD}" y="{by + 16}" fill="#fff" font-weight="bold">{esc(t["name"])}'
                     f'<tspan fill="#c9d1e0" font-weight="normal"> {plural(t.get("rows", 0), "row")}</tspan></text>')
        for i, c in enumerate(t["columns"]):
            cy = by + HEAD + ROW * i + ROW / 2 + 6
            mark = "PK" if c["pk"] else ("FK" if (t["name"], c["name"]) in fk_cols else "")
            colour = "#b26a00" if mark == "PK" else "#2f5fa7"
            weight = ' font-weight="bold"' if c["pk"] else ""
            tag = f'<tspan fill="{colour}" font-weight="bold">{mark} </tspan>' if mark else ""
            parts.append(f'<text x="{bx + PAD}" y="{cy}" fill="#1d2433"{weight}>{esc(c["name"])}</text>'
                         f'<text x="{bx + bw - PAD}" y="{cy}" fill="#5b6577" text-anchor="end">'
                         f'{tag}{esc(c["type"].lower() or "any")}</text>')
        parts.append("</g>")
    for t in tables:
        for fk in t["foreign_keys"]:
            if fk["table"] not in box:
                continue
            cx, _, cw, _ = box[t["name"]]
            px, _, pw, _ = box[fk["table"]]
            y1 = row_y(t["name"], fk["column"])
            y2 = row_y(fk["table"], fk["to"] or "")
            if px + pw < cx:  # parent to the left: child's left edge -> parent's right edge
                x1, x2 = cx, px + pw
                d = f"M{x1},{y1} C{x1 - GAP_X / 2},{y1} {x2 + GAP_X / 2},{y2} {x2},{y2}"
            else:  # same column or itself: loop out of the right edges
                x1, x2 = cx + cw, px + pw
                d = f"M{x1},{y1} C{x1 + 45},{y1} {x2 + 45},{y2} {x2},{y2}"
            parts.append(f'<path class="fk" d="{d}" fill="none" stroke="#2f5fa7" stroke-width="1.4" '
                         f'marker-end="url(#fk-arrow)"><title>{esc(t["name"])}.{esc(fk["column"])} → '
                         f'{esc(fk["table"])}.{esc(fk["to"])}</title></path>')
    parts.append("</svg>")
    return "".join(parts)
