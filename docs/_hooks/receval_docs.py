"""mkdocs hooks of the receval docs site (``hooks:`` in mkdocs.yml).

Four things are generated at build time, so they never drift from the code and the data:

* ``<!-- cli-reference -->``: every command's ``--help`` text, walked from ``receval.cli``'s
  click group;
* ``<!-- bench-results: NAME -->``: the stored results ``bench/results/NAME.json`` as tables
  (``NAME`` = ``*``: every stored result not shown elsewhere on the page); the JSON shape is
  described in bench/README.md;
* ``<!-- include: PATH -->``: a file of the repository (CHANGELOG.md, bench/README.md);
* Sphinx roles left in docstrings (``:meth:`x```, ``:func:`x```, ...) are rendered as plain code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
ROLE = re.compile(r":(?:py:)?(?:meth|func|class|attr|mod|data|obj|exc|const|term):(<code>)~?")
MARKER = re.compile(r"<!--\s*(cli-reference|bench-results|include)\s*:?\s*([^>]*?)\s*-->")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    shown: set[str] = set()

    def replace(match: re.Match) -> str:
        kind, arg = match.group(1), match.group(2)
        if kind == "cli-reference":
            return cli_reference()
        if kind == "include":
            return (ROOT / arg).read_text(encoding="utf-8")
        return bench_results(arg, shown)

    # "*" markers last, so that they list only what no named marker showed
    named = MARKER.sub(lambda m: m.group(0) if m.group(2) == "*" else replace(m), markdown)
    return MARKER.sub(lambda m: replace(m) if m.group(2) == "*" else m.group(0), named)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return ROLE.sub(r"\1", html)


# --------------------------------------------------------------------------------- CLI


def cli_reference() -> str:
    """Markdown for every command of the click group, depth first, in the group's order."""
    import click

    from receval.cli import cli

    parts: list[str] = []

    def walk(command: click.Command, name: str, parent: click.Context | None, depth=0) -> None:
        ctx = click.Context(
            command, info_name=name, parent=parent, terminal_width=96, max_content_width=96
        )
        level = "#" * (2 + min(depth, 2))
        parts.append(f"{level} `{ctx.command_path}`\n\n```text\n{command.get_help(ctx)}\n```\n")
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                walk(command.get_command(ctx, sub), sub, ctx, depth + 1)

    walk(cli, "receval", None)
    return "\n".join(parts)


# ------------------------------------------------------------------------ bench results


def bench_results(name: str, shown: set[str]) -> str:
    if name == "*":
        paths = [p for p in sorted(RESULTS.glob("*.json")) if p.stem not in shown]
        if not paths:
            return "*No other stored results.*\n"
        return "\n".join(render_result_file(p) for p in paths)
    shown.add(name)
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        return (
            f"*No stored results yet: `bench/results/{name}.json` is written by "
            f"`bench/{name}.py` (see bench/README.md).*\n"
        )
    return render_result_file(path)


def render_result_file(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"*`bench/results/{path.name}` could not be read: {exc}.*\n"
    return "\n".join(render_record(path, r) for r in _records(data))


def _records(data: Any) -> list[dict]:
    """The records of a results file: one record (``command``/``figures`` at the top), a list
    of them, a ``runs`` list or mapping of them, or a mapping of named studies, each a record."""
    if isinstance(data, list):
        return [r for r in data if isinstance(r, dict)]
    if not isinstance(data, dict):
        return []
    if "command" in data or "figures" in data:
        return [data]
    runs = data.get("runs")
    if isinstance(runs, list):
        return [r for r in runs if isinstance(r, dict)]
    named = runs if isinstance(runs, dict) else data
    studies = [
        {**record, "title": record.get("title") or str(name)}
        for name, record in named.items()
        if isinstance(record, dict) and ("command" in record or "figures" in record)
    ]
    return studies or [data]


def render_record(path: Path, record: dict) -> str:
    title = record.get("title") or f"bench/results/{path.name}"
    lines = [f"#### {title}\n"]
    if record.get("description"):
        lines.append(f"{record['description']}\n")
    meta = [f"command `{record.get('command', '?')}`"]
    for key in ("seed", "commit", "date"):
        if record.get(key) is not None:
            meta.append(f"{key} `{record[key]}`")
    lines.append("Regenerate: " + ", ".join(meta) + f" (stored in `bench/results/{path.name}`).\n")
    for table in record.get("tables") or []:
        lines.append(render_table(table))
    if "figures" in record:
        lines.append(render_figures(record["figures"]))
    return "\n".join(lines)


def render_table(table: dict) -> str:
    rows = table.get("rows") or []
    columns = table.get("columns") or _columns(rows)
    head = f"**{table['title']}**\n\n" if table.get("title") else ""
    return head + _markdown_table(columns, rows)


def render_figures(figures: Any, prefix: str = "") -> str:
    if isinstance(figures, list) and figures and all(isinstance(r, dict) for r in figures):
        return _markdown_table(_columns(figures), figures)
    if isinstance(figures, dict):
        scalars = {k: v for k, v in figures.items() if not isinstance(v, dict | list)}
        out = []
        if scalars:
            rows = [{"figure": prefix + k, "value": v} for k, v in scalars.items()]
            out.append(_markdown_table(["figure", "value"], rows))
        for key, value in figures.items():
            if isinstance(value, dict | list):
                out.append(f"**{prefix}{key}**\n\n" + render_figures(value, f"{prefix}{key}."))
        return "\n".join(out)
    return f"```json\n{json.dumps(figures, indent=1)}\n```\n"


def _columns(rows: list[dict]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    return columns


def _markdown_table(columns: list[str], rows: list) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            value = f"{value:.4g}"
        return str("" if value is None else value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        values = [row.get(c) for c in columns] if isinstance(row, dict) else list(row)
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines) + "\n"
