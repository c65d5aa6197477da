"""Budget and adaptive planning for the judge (`budget --estimator ppi`, `sample --adaptive
--by-judge`): the draws' variance times 1 − ρ_lo², ρ_lo a lower confidence bound on the judge's
correlation with the labels (receval.planning.judge_factor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import load_bench

from receval.cli import cli
from receval.planning import adaptive_sample_sizes, expected_widths, judge_factor
from receval.task import load_task, with_annotation

BENCH = Path(__file__).resolve().parents[1] / "bench" / "ppi.py"


@pytest.fixture(scope="module")
def bench():
    return load_bench("ppi")


@pytest.fixture(scope="module")
def world(bench):
    return bench.simulated_world(seed=5, systems=6, queries=20)


def judged_task(bench, world, quality: str, n: int = 15):
    judge = bench.judge_scores(world, quality, np.random.default_rng(2))
    return with_annotation(world.task, judge=judge, **world.annotate(np.random.default_rng(3), n))


def test_judge_factor_follows_the_judges_correlation(bench, world):
    strong = judge_factor(judged_task(bench, world, "strong"))
    weak = judge_factor(judged_task(bench, world, "weak"))
    inverted = judge_factor(judged_task(bench, world, "inverted"))
    assert 0.3 < strong < 0.75  # ρ ≈ 0.8: 1 − ρ² ≈ 0.36, its lower bound leaves more
    assert strong < weak <= 1.0
    assert inverted == pytest.approx(strong)  # calibrated by the labels, an inverted judge helps


def test_judge_factor_is_one_with_few_labels(bench, world):
    assert judge_factor(judged_task(bench, world, "strong", n=1)) == 1.0


def test_widths_and_sizes_shrink_with_a_strong_judge(bench, world):
    task = judged_task(bench, world, "strong")
    factor = judge_factor(task)
    plain = expected_widths(task, 20)
    judged = expected_widths(task, 20, judge=True)
    ratio = judged["precision_halfwidth"] / plain["precision_halfwidth"]
    np.testing.assert_allclose(ratio, np.sqrt(factor), rtol=1e-9)
    assert (judged["recall_halfwidth"] <= plain["recall_halfwidth"] + 1e-12).all()
    systems = list(task.systems[:3])
    sizes = adaptive_sample_sizes(task, 0.1, systems=systems, metrics=("precision",))
    fewer = adaptive_sample_sizes(task, 0.1, systems=systems, metrics=("precision",), judge=True)
    assert (fewer["n"] < sizes["n"]).all()
    by_judge = expected_widths(task, 20, judge=True, design="judge-uncertainty")
    assert np.isfinite(by_judge["precision_halfwidth"]).all()


def test_cli_budget_for_ppi(bench, world, tmp_path):
    root = tmp_path / "b"
    shutil.copytree(world.task.root, root)
    tables = world.annotate(np.random.default_rng(3), 15)
    tables["judge"] = bench.judge_scores(world, "strong", np.random.default_rng(2))
    for name, frame in tables.items():
        frame.to_csv(root / f"{name}.tsv", sep="\t", index=False)
    args = ["budget", str(root), "--total", "120"]
    plain = CliRunner().invoke(cli, args)
    judged = CliRunner().invoke(cli, [*args, "--estimator", "ppi", "--by-judge"])
    assert plain.exit_code == 0 and judged.exit_code == 0, judged.output
    assert "ppi: the draws' variance times" in judged.output
    (root / "judge.tsv").unlink()
    missing = CliRunner().invoke(cli, [*args, "--estimator", "ppi"])
    lines = missing.output.strip().splitlines()
    assert missing.exit_code == 2 and len(lines) == 1, missing.output
    assert lines[0].startswith("error: ") and "judge.tsv" in lines[0]
    assert load_task(root).judge is None
