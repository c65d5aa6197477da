"""The docs site's generated parts (docs/_hooks/receval_docs.py) and the README's limits."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_hooks():
    spec = importlib.util.spec_from_file_location(
        "receval_docs", ROOT / "docs" / "_hooks" / "receval_docs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_stays_short_and_keeps_what_ci_and_tests_read():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    block = re.search(r"<!-- test-command -->\s*```\s*(.+?)\s*```", text, re.S).group(1)
    assert block == "python -m pip install -e '.[test]' && python -m pytest -q -m \"not slow\""
    assert "<!-- main-command -->" in text and "docs/contracts.md" in text
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link


def test_cli_reference_lists_every_command():
    from receval.cli import cli

    markdown = load_hooks().cli_reference()
    for name in cli.commands:
        assert f"`receval {name}`" in markdown, name
    assert "`receval curve plan`" in markdown and "`receval import trec`" in markdown
    assert "Usage: receval score [OPTIONS] TASK" in markdown


def test_stored_bench_results_render_as_tables(tmp_path, monkeypatch):
    hooks = load_hooks()
    monkeypatch.setattr(hooks, "RESULTS", tmp_path)
    record = {
        "command": "python bench/ppi.py --runs 40",
        "seed": 1,
        "commit": "abc1234",
        "date": "2026-11-28T14:00:00+00:00",
        "figures": {"runs": 40, "widths": [{"world": "sim", "n": 10, "ratio": 0.791234}]},
    }
    (tmp_path / "ppi.json").write_text(json.dumps(record))
    (tmp_path / "broken.json").write_text("{not json")
    page = "<!-- bench-results: ppi -->\n<!-- bench-results: * -->\n<!-- bench-results: gone -->"
    out = hooks.on_page_markdown(page, None, None, None)
    assert "command `python bench/ppi.py --runs 40`, seed `1`, commit `abc1234`" in out
    assert "| world | n | ratio |" in out and "| sim | 10 | 0.7912 |" in out
    assert "| runs | 40 |" in out
    assert out.count("bench/results/ppi.json") == 2  # shown once (title and source line)
    assert "`bench/results/broken.json` could not be read" in out
    assert "No stored results yet: `bench/results/gone.json`" in out


def test_sphinx_roles_render_as_code():
    hooks = load_hooks()
    html = "see :meth:<code>~receval.Task.from_frames</code> and :func:<code>x</code>"
    assert hooks.on_page_content(html, None, None, None) == (
        "see <code>receval.Task.from_frames</code> and <code>x</code>"
    )
