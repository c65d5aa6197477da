"""bench/: every script goes through bench/harness.py and stores its figures; every stored record
says how to regenerate it; every table on the validation page names its command (fast: reads
files only)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import load_bench

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
VALIDATION = ROOT / "docs" / "validation.md"


def _scripts() -> list[Path]:
    return sorted(BENCH.glob("*.py"))


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_every_stored_record_says_how_to_regenerate_it(path: Path) -> None:
    harness = load_bench("harness")
    records = harness.records(json.loads(path.read_text(encoding="utf-8")))
    assert records, f"{path.name}: no record"
    for record in records:
        missing = [key for key in harness.REQUIRED if key not in record]
        assert not missing, f"{path.name}: {record.get('title')}: no {missing}"
        assert f"bench/{path.stem}.py" in record["command"], record["command"]
        assert record["figures"] not in (None, {}, []), f"{path.name}: empty figures"


def test_every_script_stores_its_results_through_the_harness_or_is_a_library() -> None:
    harness = load_bench("harness")
    for path in _scripts():
        if path.stem in harness.LIBRARIES:
            continue
        text = path.read_text(encoding="utf-8")
        assert "import harness" in text, f"{path.name} does not use bench/harness.py"
        assert re.search(r"harness\.store(_result)?\(", text), f"{path.name} stores nothing"
        assert f'"{path.stem}"' in text, f"{path.name} stores under another name"
        assert not _own_clocks(text), f"{path.name}: {_own_clocks(text)} belong in the harness"


#: what bench/harness.py measures for every script (its timed, peak_rss_mib, run_child, git_commit)
CLOCKS = {("tracemalloc", "start"), ("resource", "getrusage"), ("os", "wait4")}


def _own_clocks(text: str) -> list[str]:
    """The harness's measuring calls a script makes itself (``tracemalloc.start`` ...)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in CLOCKS:
                found.append(f"{node.value.id}.{node.attr}")
    return found


def test_every_stored_result_belongs_to_a_script() -> None:
    scripts = {p.stem for p in _scripts()}
    assert {p.stem for p in RESULTS.glob("*.json")} <= scripts


def test_validation_page_names_a_command_for_every_table_and_has_every_result() -> None:
    text = VALIDATION.read_text(encoding="utf-8")
    assert "no command" not in text.lower()
    for name in re.findall(r"<!--\s*bench-results:\s*([\w]+)\s*-->", text):
        assert (RESULTS / f"{name}.json").is_file(), f"validation.md shows {name}: no results"
    blocks = re.split(r"\n(?=#)", text)  # one block per heading
    for block in blocks:
        context = ""
        for paragraph in re.split(r"\n\s*\n", block):
            if paragraph.lstrip().startswith("|") and not paragraph.startswith("| name |"):
                header = paragraph.splitlines()[0]
                named = re.search(r"`(python bench/|receval )", context) or "command" in header
                assert named, f"a table with no command before it:\n{paragraph[:200]}"
                # written tables quote full-size runs; rendered ones come from bench/results/
                said = "not re-run in this round" in " ".join((context + paragraph).split())
                assert said, f"a written table not marked as such:\n{paragraph[:200]}"
            else:
                context += paragraph


def test_store_result_keeps_one_record_per_configuration(tmp_path: Path) -> None:
    harness = load_bench("harness")
    out = tmp_path / "x.json"
    harness.store_result("x", "python bench/x.py --quick", 1, {"a": 1}, title="quick", out=out)
    harness.store_result("x", "python bench/x.py", 1, {"a": 2}, title="full", out=out)
    harness.store_result("x", "python bench/x.py --quick", 1, {"a": 3}, title="quick", out=out)
    records = harness.records(json.loads(out.read_text()))
    assert [(r["title"], r["figures"]["a"]) for r in records] == [("full", 2), ("quick", 3)]
    assert all(set(harness.REQUIRED) <= set(r) for r in records)
    assert records[0]["machine"]["cpus"] >= 1 and "config" in records[0]


def test_quick_stands_for_its_preset_and_given_options_win() -> None:
    harness = load_bench("harness")
    parser = harness.parser("doc", seed=3, reps=100, quick={"reps": 10})
    assert harness.parse(parser, []).reps == 100
    args = harness.parse(parser, ["--quick"])
    assert args.reps == 10 and args.seed == 3
    assert harness.configuration(args) == "quick (reps=10)"
    assert harness.parse(parser, ["--quick", "--reps", "20"]).reps == 20
    runs = harness.parser("doc", reps=40, reps_name="runs")
    assert harness.parse(runs, ["--reps", "5"]).runs == 5
    assert harness.parse(runs, ["--runs", "6"]).runs == 6
