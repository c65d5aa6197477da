"""The official estimator on TREC bundles agrees with trec_eval (through pytrec_eval).

Generated runs with score ties (also ties that exist only in single precision), runs shorter than
the cutoff, graded relevance (grades -1..3), unjudged documents, topics only in the qrels and
topics only in the runs.  ``P_K``, ``recall_K``, ``set_P`` and ``set_recall`` must equal
trec_eval's per query and averaged over queries to 1e-9 (both sides compute the same ratios of
small integers, so the only differences are float rounding, far below 1e-9).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.formats.bundle import write_bundle
from receval.formats.trec import import_trec
from receval.official.responses import trec_eval_rank
from receval.official.rules import OfficialPolicy
from receval.official.scores import official_per_query, official_scores
from receval.task import load_task

pytrec_eval = pytest.importorskip("pytrec_eval")

TOL = 1e-9


def _world(rng: np.random.Generator, n_systems: int = 4, n_queries: int = 12):
    """Random qrels and runs (dicts as pytrec_eval takes them)."""
    docs = [f"D{i:03d}" for i in range(60)]
    qrels: dict[str, dict[str, int]] = {}
    for q in range(n_queries - 2):  # the last two topics are not in the qrels
        judged = rng.choice(docs, size=rng.integers(1, 25), replace=False)
        grades = rng.choice([-1, 0, 0, 1, 2, 3], size=len(judged))
        qrels[f"q{q}"] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
    qrels["q_only_in_qrels"] = {"D000": 1, "D001": 0}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for s in range(n_systems):
        run: dict[str, dict[str, float]] = {}
        for q in range(n_queries):
            if rng.random() < 0.15:
                continue  # the system skips this topic
            size = int(rng.integers(1, 30))  # often shorter than the cutoffs
            chosen = rng.choice(docs, size=size, replace=False)
            # coarse scores make ties; +1e-12 makes ties that exist only in float32
            scores = np.round(rng.random(size) * 4) / 4
            scores = scores + np.where(rng.random(size) < 0.3, 1e-12, 0.0)
            run[f"q{q}"] = {str(d): float(v) for d, v in zip(chosen, scores, strict=True)}
        runs[f"sys{s}"] = run
    return qrels, runs


def _write(tmp_path: Path, qrels, runs) -> Path:
    qpath = tmp_path / "qrels.txt"
    qpath.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())
    )
    paths = []
    for name, run in runs.items():
        path = tmp_path / f"{name}.run"
        lines = []
        for q, scored in run.items():
            for rank, (d, v) in enumerate(scored.items(), start=1):
                lines.append(f"{q} Q0 {d} {rank} {v!r} {name}\n")
        path.write_text("".join(lines))
        paths.append(path)
    tables, config = import_trec(qpath, paths)
    return write_bundle(tmp_path / "bundle", tables, config)


@pytest.fixture(scope="module", params=[0, 1, 2])
def world(request, tmp_path_factory):
    rng = np.random.default_rng(request.param)
    qrels, runs = _world(rng)
    root = _write(tmp_path_factory.mktemp(f"trec{request.param}"), qrels, runs)
    return qrels, runs, load_task(root)


def _theirs(qrels, run, measures):
    return pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)


def test_import_records_the_trec_convention(world):
    _, _, task = world
    assert task.config.unjudged == "wrong"
    assert OfficialPolicy().resolved_unassessed(task) == "wrong"


@pytest.mark.parametrize("k", [1, 5, 10, 30])
def test_precision_and_recall_at_k_per_query_and_averaged(world, k):
    qrels, runs, task = world
    per_query = official_per_query(task, cutoff=k).set_index(["system", "query_id"])
    macro = official_scores(task, average="macro", cutoff=k).set_index("system")
    for system, run in runs.items():
        theirs = _theirs(qrels, run, [f"P_{k}", f"recall_{k}"])
        mine = per_query.loc[system]
        evaluated = sorted(mine.index[mine["evaluated"] > 0])
        assert evaluated == sorted(theirs)
        for q, values in theirs.items():
            assert mine.loc[q, "precision"] == pytest.approx(values[f"P_{k}"], abs=TOL)
            assert mine.loc[q, "recall"] == pytest.approx(values[f"recall_{k}"], abs=TOL)
        p_mean = np.mean([v[f"P_{k}"] for v in theirs.values()])
        r_mean = np.mean([v[f"recall_{k}"] for v in theirs.values()])
        assert macro.loc[system, "precision"] == pytest.approx(p_mean, abs=TOL)
        assert macro.loc[system, "recall"] == pytest.approx(r_mean, abs=TOL)
        assert macro.loc[system, "queries"] == len(theirs)


def test_set_precision_and_recall_per_query_and_averaged(world):
    qrels, runs, task = world
    per_query = official_per_query(task).set_index(["system", "query_id"])
    macro = official_scores(task, average="macro").set_index("system")
    for system, run in runs.items():
        theirs = _theirs(qrels, run, ["set_P", "set_recall"])
        for q, values in theirs.items():
            assert per_query.loc[(system, q), "precision"] == pytest.approx(
                values["set_P"], abs=TOL
            )
            assert per_query.loc[(system, q), "recall"] == pytest.approx(
                values["set_recall"], abs=TOL
            )
        assert macro.loc[system, "precision"] == pytest.approx(
            np.mean([v["set_P"] for v in theirs.values()]), abs=TOL
        )
        assert macro.loc[system, "recall"] == pytest.approx(
            np.mean([v["set_recall"] for v in theirs.values()]), abs=TOL
        )


def test_import_records_trec_eval_averaging(world):
    _, _, task = world
    assert task.config.average == "macro"
    text = (task.root / "task.toml").read_text()
    assert '[official]\nunjudged = "wrong"\naverage = "macro"\n' in text


def test_default_official_score_is_trec_eval_set_measures(world, tmp_path):
    """``receval score --estimator official`` on an imported TREC bundle, with no option about
    averaging, prints trec_eval's set_P, set_recall and set_F (means over the judged topics a
    run answered) to 4 decimals."""
    qrels, runs, task = world
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["score", str(task.root), "--out", str(out), "--estimator", "official", "--no-report"]
    )
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv").set_index("system")
    for system, run in runs.items():
        theirs = _theirs(qrels, run, ["set_P", "set_recall", "set_F"]).values()
        for column, measure in (("precision", "set_P"), ("recall", "set_recall"), ("f1", "set_F")):
            expected = np.mean([v[measure] for v in theirs])
            assert board.loc[system, column] == pytest.approx(expected, abs=5e-5), (system, column)
    assert board["note"].str.contains("macro-averaged").all()
    assert (board["estimator"] == "official (macro)").all()


def test_micro_average_pools_the_counts(world):
    qrels, runs, task = world
    micro = official_scores(task).set_index("system")
    for system, run in runs.items():
        judged_topics = [q for q in run if q in qrels]
        retrieved = sum(len(run[q]) for q in judged_topics)
        relevant_retrieved = sum(sum(qrels[q].get(d, 0) > 0 for d in run[q]) for q in judged_topics)
        relevant = sum(sum(g > 0 for g in judged.values()) for judged in qrels.values())
        assert micro.loc[system, "precision"] == pytest.approx(relevant_retrieved / retrieved)
        assert micro.loc[system, "recall"] == pytest.approx(relevant_retrieved / relevant)


def test_ignoring_unjudged_documents_is_precision_over_judged_ones(world):
    qrels, runs, task = world
    ignore = official_scores(task, OfficialPolicy(unassessed="ignore")).set_index("system")
    for system, run in runs.items():
        judged = [(q, d) for q in run if q in qrels for d in run[q] if d in qrels[q]]
        relevant = sum(qrels[q][d] > 0 for q, d in judged)
        assert ignore.loc[system, "precision"] == pytest.approx(relevant / len(judged))


def test_ties_break_on_single_precision_score_then_docid_descending():
    runs = pd.DataFrame(
        {
            "system": ["s"] * 4,
            "query_id": ["q"] * 4,
            # 0.5 and 0.5 + 1e-12 are equal as float32: the larger docid comes first
            "score": [0.5, 0.5 + 1e-12, 0.25, 0.5],
            "answer_raw": ["A", "B", "Z", "C"],
        }
    )
    assert trec_eval_rank(runs).tolist() == [3, 2, 4, 1]


def test_short_runs_still_divide_by_k(tmp_path):
    qrels = {"q1": {"d1": 1, "d2": 1}}
    runs = {"s": {"q1": {"d1": 1.0}}}
    task = load_task(_write(tmp_path, qrels, runs))
    row = official_scores(task, cutoff=10).iloc[0]
    assert row["precision"] == pytest.approx(0.1)  # 1 relevant / K = 10
    assert row["recall"] == pytest.approx(0.5)
    assert "P@10 divides by 10" in _cli_note(tmp_path, ["--cutoff", "10"])


def _cli_note(tmp_path: Path, extra: list[str]) -> str:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        ["score", str(tmp_path / "bundle"), "--out", str(out), "--estimator", "official", *extra],
    )
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "leaderboard.csv")["note"].iloc[0]


def test_cli_options(tmp_path):
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1}}
    runs = {"s": {"q1": {"d1": 1.0, "d9": 0.5}, "q2": {"d4": 0.3}}}
    _write(tmp_path, qrels, runs)
    assert "unjudged responses count wrong" in _cli_note(tmp_path, [])
    # import trec records trec_eval's rule ([official] average = "macro"); --average overrides it
    assert "macro-averaged" in _cli_note(tmp_path, [])
    assert "micro-averaged" in _cli_note(tmp_path, ["--average", "micro"])
    assert "macro-averaged" in _cli_note(tmp_path, ["--average", "macro"])
    # --target macro is no longer ignored by the official estimator
    assert "macro-averaged" in _cli_note(tmp_path, ["--target", "macro"])
    assert "ignored" in _cli_note(tmp_path, ["--unjudged", "ignore", "--average", "micro"])
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert board["precision"].iloc[0] == pytest.approx(1.0)  # d1 only; d9 and d4 unjudged
    runner = CliRunner()
    bad = runner.invoke(
        cli, ["score", str(tmp_path / "bundle"), "--out", str(tmp_path / "o2"), "--cutoff", "5"]
    )
    assert bad.exit_code == 2 and "--cutoff applies to --estimator official only" in bad.output
    bad = runner.invoke(
        cli,
        [
            "score",
            str(tmp_path / "bundle"),
            "--out",
            str(tmp_path / "o3"),
            "--estimator",
            "official",
            "--target",
            "macro",
            "--average",
            "micro",
        ],
    )
    assert bad.exit_code == 2 and "contradicts" in bad.output
    run_json = (tmp_path / "out" / "run.json").read_text()
    assert '"unjudged": "ignore"' in run_json
