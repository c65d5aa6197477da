"""The Bundle as the one owner of a task on disk: the reading package's layout, the names
``receval.task`` still exports, the API taking a Bundle, and writers at once losing nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_bundle
from test_import_graph import import_graph

from receval import api, operations
from receval.bundle import Bundle
from receval.formats.tables import read_table
from receval.task import load_task, normalize_answers

#: the reading modules of receval.bundle in their import order (the package's docstring)
BUNDLE_ORDER = ("answers", "sources", "checks", "runs")


def test_the_bundle_package_imports_one_way_below_the_task():
    graph = import_graph()
    prefix = "receval.bundle."
    assert {m for m in graph if m.startswith(prefix)} == {prefix + m for m in BUNDLE_ORDER}
    for i, mod in enumerate(BUNDLE_ORDER):
        edges = graph[prefix + mod]
        later = {e for e in edges if e.startswith(prefix)} - {prefix + m for m in BUNDLE_ORDER[:i]}
        assert not later, f"{mod} imports {sorted(later)}, which come after it"
        # reading knows nothing of the view it feeds, nor of the owner above it
        assert not {"receval.task", "receval.bundle", "receval.api"} & edges, (mod, edges)


def test_task_still_exports_every_name_it_defined_before_the_split():
    """Everything the bundle's reading modules define came from receval.task (or reads a folder
    as load_task did): ``from receval.task import <it>`` keeps working, explicitly re-exported
    for the names other modules import, else through the module's ``__getattr__``."""
    import ast

    import receval.task as task
    from receval.bundle import answers, checks, runs, sources

    for module in (answers, sources, checks, runs):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                assert getattr(task, name) is getattr(module, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_it'"):
        task.nothing_like_it  # noqa: B018


def _pending_keys(root: Path) -> tuple[set, set]:
    """(facts drawn and still unlabelled, facts to_annotate.tsv lists), as (query, answer)."""
    task = load_task(root)
    pending = set(task.samples["fact"]) - set(task.labels.index)
    facts = task.facts.loc[sorted(pending), ["query_id", "answer"]]
    todo = read_table(root / "to_annotate.tsv")
    todo = todo[todo["kind"] == "fact"]
    listed = normalize_answers(todo["answer"].astype(str), task.config.matching)
    return set(zip(facts["query_id"], facts["answer"], strict=True)), set(
        zip(todo["query_id"], listed, strict=True)
    )


def test_library_writers_at_once_each_record_their_round(tmp_path):
    """Four threads draw and record a round at once (api.sample_round): four rounds, each its
    own name and every draw, and to_annotate.tsv lists every drawn fact still unlabelled."""
    root = make_bundle(tmp_path)
    before = load_task(root)
    systems = len(before.systems)
    with ThreadPoolExecutor(max_workers=4) as pool:
        rounds = list(pool.map(lambda k: api.sample_round(root, 2, seed=k), range(4)))
    after = load_task(root)
    assert len({r.name for r in rounds}) == 4
    assert set(after.samples["sample"]) == set(before.samples["sample"]) | {r.name for r in rounds}
    assert len(after.samples) == len(before.samples) + 4 * 2 * systems
    drawn, listed = _pending_keys(root)
    assert drawn == listed


def test_the_cli_and_the_library_at_once_lose_nothing(tmp_path):
    """``receval sample`` in another process and two library writers in this one, released
    together from a held lock: three rounds, every draw, nothing pending unlisted."""
    root = make_bundle(tmp_path)
    before = load_task(root)
    bundle = Bundle(root, lock_timeout=120)
    with bundle.lock():  # everyone below waits for this
        cli = subprocess.Popen(
            [sys.executable, "-m", "receval.cli", "sample", str(root), "--per-system", "3",
             "--seed", "7", "--name", "cli"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        threads = [
            threading.Thread(target=api.sample_round, args=(bundle, 1), kwargs={"seed": s})
            for s in (1, 2)
        ]
        for thread in threads:
            thread.start()
    for thread in threads:
        thread.join(timeout=120)
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    after = load_task(root)
    assert after.samples["sample"].nunique() == before.samples["sample"].nunique() + 3
    assert len(after.samples) == len(before.samples) + (3 + 1 + 1) * len(before.systems)
    drawn, listed = _pending_keys(root)
    assert drawn == listed


@pytest.mark.parametrize("writer", ["Bundle.append", "append_rows"])
def test_appends_at_once_all_land(tmp_path, writer):
    """Rows appended from several threads at once all land, through the Bundle or through the
    plain library function (which takes the same lock)."""
    from receval.formats.bundle import append_rows

    root = make_bundle(tmp_path, judgments=None)
    bundle = Bundle(root)
    append = bundle.append if writer == "Bundle.append" else partial(append_rows, root)
    facts = load_task(root).outputs[["query_id", "answer_raw"]].drop_duplicates()
    rows = [
        pd.DataFrame({"query_id": [q], "answer": [a], "label": ["correct"], "annotator": [f"a{i}"]})
        for i, (q, a) in enumerate(facts.itertuples(index=False))
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda frame: append("judgments", frame), rows))
    judgments = load_task(root).judgments
    assert sorted(judgments["annotator"]) == sorted(f"a{i}" for i in range(len(rows)))


def test_add_units_appends_units_and_their_facts(tmp_path):
    root = make_bundle(tmp_path)
    bundle = Bundle(root)
    before = load_task(root)
    bundle.add_units(
        pd.DataFrame({"unit": ["d3"]}),
        pd.DataFrame({"unit": ["d3"], "query_id": ["q2"], "answer": ["Milan"]}),
    )
    after = load_task(root)
    assert len(after.exhaustive_units) == len(before.exhaustive_units) + 1
    assert set(after.exhaustive["unit"]) == set(before.exhaustive["unit"]) | {"d3"}


def test_the_api_takes_a_bundle_as_it_takes_its_path(tmp_path):
    root = make_bundle(tmp_path)
    bundle = Bundle(root)
    assert operations.validate(bundle).lines() == operations.validate(root).lines()
    by_path = api.score(root, bootstrap=50, seed=1)
    by_bundle = api.score(bundle, bootstrap=50, seed=1)
    pd.testing.assert_frame_equal(by_bundle.leaderboard, by_path.leaderboard)
    drawn = api.sample(bundle, 2, seed=3)
    assert drawn.samples.equals(api.sample(root, 2, seed=3).samples)
    with pytest.raises(TypeError, match="writes to a bundle"):
        api.sample_round(load_task(root), 2, seed=3)
