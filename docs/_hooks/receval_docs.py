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
import sys
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
    return "\n".join(render_record(path, r) for r in _bench_harness().records(data))


def _bench_harness() -> Any:
    """bench/harness.py (the one reader of the record shapes; a script folder, not a package)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    import harness

    return harness


def render_record(path: Path, record: dict) -> str:
    title = record.get("title") or f"bench/results/{path.name}"
    lines = [f"#### {title}\n"]
    if record.get("description"):
        lines.append(f"{record['description']}\n")
    meta = [f"command `{record.get('command', '?')}`"]
    for key in ("seed", "commit", "date"):
        if record.get(key) is not None:
            meta.append(f"{key} `{_short(record[key]) if key == 'commit' else record[key]}`")
    lines.append("Regenerate: " + ", ".join(meta) + f" (stored in `bench/results/{path.name}`).\n")
    lines += _run_conditions(record)
    for table in record.get("tables") or []:
        lines.append(render_table(table))
    if "figures" in record:
        lines.append(render_figures(record["figures"]))
    if record.get("output"):
        lines.append("Printed by the run:\n\n```text\n" + record["output"].rstrip() + "\n```\n")
    return "\n".join(lines)


def _short(commit: Any) -> str:
    """A full hexadecimal commit (maybe ``+dirty``) to 7 digits; anything else as it is."""
    text = str(commit)
    head, _, dirty = text.partition("+")
    if re.fullmatch(r"[0-9a-f]{40}", head):
        return head[:7] + ("+" + dirty if dirty else "")
    return text


def _run_conditions(record: dict) -> list[str]:
    """The configuration and the machine of a run, when the record states them."""
    parts = []
    if record.get("config"):
        parts.append(f"configuration: {record['config']}")
    machine = record.get("machine")
    if isinstance(machine, dict):
        load = machine.get("load_average")
        load_text = f", load average {load[0]:g} / {load[1]:g} / {load[2]:g}" if load else ""
        parts.append(f"machine: {machine.get('cpus')} CPUs{load_text}, nice {machine.get('nice')}")
    return [f"*{'; '.join(parts)}.*\n"] if parts else []


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
