"""``sample --adaptive`` on the engine path beyond uniform designs
(:mod:`receval.engine.plan_designs`): rounds drawn ``--by-judge`` in the existing mass, the
``--by-judge`` plan (the judge-strata design, the judge's factor for ``--estimator ppi``), the
entity-relation plan and equivalence classes give the in-memory planner's frame, and the CLI
records the in-memory round byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_engine_classes import with_classes, with_entity_relation_round
from test_engine_designs import judge_bundle, with_judge, with_judge_round
from test_engine_score import make_bundle

from receval.bundle import Bundle
from receval.cli import cli


def correlated(root: Path) -> Path:
    """``root``'s judge scores moved towards the labels (0.75 correct, 0.3 wrong, 0.5
    unlabelled, plus noise): a judge whose factor 1 − ρ_lo² is below 1."""
    judge = pd.read_csv(root / "judge.tsv", sep="\t", dtype=str)
    labels = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
    labels = labels.drop_duplicates(["query_id", "answer"])[["query_id", "answer", "label"]]
    label = judge.merge(labels, how="left", on=["query_id", "answer"])["label"]
    base = np.where(label == "C", 0.75, np.where(label == "W", 0.3, 0.5))
    noise = np.random.default_rng(0).normal(0, 0.1, len(judge))
    judge["judge_score"] = np.round(np.clip(base + noise, 0, 1), 3)
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    return root


def _bundle(root: Path, kind: str) -> Path:
    if kind == "strata-drawn":
        return judge_bundle(root, {"teams": True})
    if kind == "strata-drawn-graded-classes":
        return judge_bundle(root, {"classes": True, "graded": True})
    if kind == "judge":
        return with_judge_round(correlated(with_judge(make_bundle(root))))
    if kind == "two-judges":
        return judge_bundle(root, {"judges": ("a", "b"), "layout": "one-file"})
    if kind == "entity-relation":
        return with_entity_relation_round(make_bundle(root))
    if kind == "classes":
        return with_classes(make_bundle(root, teams=True))
    if kind == "classes-entity-relation":
        return with_classes(with_entity_relation_round(make_bundle(root)))
    raise AssertionError(kind)


CASES = [
    ("strata-drawn", "uniform", False, "expected"),
    ("strata-drawn-graded-classes", "uniform", False, "paper"),
    ("judge", "uniform", True, "expected"),
    ("judge", "uniform", True, "exchangeable"),
    ("two-judges", "uniform", True, "expected"),
    ("entity-relation", "entity-relation", False, "expected"),
    ("entity-relation", "entity-relation", False, "paper"),
    ("classes", "uniform", False, "expected"),
    ("classes-entity-relation", "entity-relation", False, "expected"),
    ("strata-drawn-graded-classes", "uniform", True, "expected"),
]


@pytest.mark.parametrize(("kind", "distribution", "by_judge", "bound"), CASES)
def test_engine_plan_equals_the_in_memory_plan(tmp_path, kind, distribution, by_judge, bound):
    """Sizes, half-widths and notes of the engine's plan equal the in-memory planner's (the
    design ``sample --adaptive`` plans there: ``judge_strata_design`` with ``--by-judge``)."""
    import receval
    from receval.engine.adaptive import adaptive_sizes
    from receval.estimators.judge_calibration import judge_strata_design
    from receval.planning import adaptive_sample_sizes, judge_factor

    root = _bundle(tmp_path / "b", kind)
    task = receval.load_task(root)
    design = judge_strata_design(task) if by_judge else distribution
    if kind == "judge":
        assert judge_factor(task) < 0.99  # the judge's factor is read
    if kind.startswith("strata"):
        assert any(d.startswith("judge-strata:") for d in task.samples["design"])
    for systems, width in ((["A", "C"], 0.1), (["B", "D"], 0.15)):
        memory = adaptive_sample_sizes(
            task, width, systems=systems, bound=bound, judge=by_judge, design=design
        )
        engine = adaptive_sizes(
            Bundle(root), width, systems=systems, bound=bound, distribution=distribution,
            by_judge=by_judge,
        )  # fmt: skip
        pd.testing.assert_frame_equal(engine, memory, rtol=1e-9)
    assert memory["n"].gt(0).any()


def _sample(root: Path, *args: str):
    return CliRunner().invoke(cli, ["sample", str(root), *args])


@pytest.mark.parametrize(
    ("kind", "args"),
    [("judge", ("--by-judge",)), ("entity-relation", ("--distribution", "entity-relation")),
     ("strata-drawn-graded-classes", ())],
)  # fmt: skip
def test_cli_adaptive_out_of_core_records_the_in_memory_round(tmp_path, kind, args):
    """`sample --adaptive` with --by-judge, --distribution entity-relation, or over rounds
    drawn --by-judge and classes: --out-of-core prints the in-memory plan and writes the same
    samples.tsv and to_annotate.tsv, byte for byte."""
    roots = {k: _bundle(tmp_path / k, kind) for k in ("memory", "engine")}
    plan = ["--adaptive", "--target-width", "0.15", "--system", "A", "--system", "C"]
    outputs = {}
    flags = {"memory": "--in-memory", "engine": "--out-of-core"}
    for k, root in roots.items():
        result = _sample(root, *plan, *args, "--seed", "4", flags[k])
        assert result.exit_code == 0, result.output
        outputs[k] = [line for line in result.output.splitlines() if " n = " in line]
    assert outputs["memory"] and outputs["memory"] == outputs["engine"]
    for name in ("samples.tsv", "to_annotate.tsv"):
        assert (roots["memory"] / name).read_bytes() == (roots["engine"] / name).read_bytes()


def test_designs_the_engine_does_not_plan_are_one_line(tmp_path):
    """A round of the judge-uncertainty design, or rounds drawn --by-judge by two judges: one
    usage line with --out-of-core (the in-memory planner plans them)."""
    from receval.engine.adaptive import unsupported
    from receval.engine.sampled_data import read_small_tables

    root = judge_bundle(tmp_path / "b", {"judges": ("a", "b")})
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    strata = samples["design"].str.startswith("judge-strata:")
    first = samples.loc[strata, "design"].iloc[0]
    name = first.split(":")[1]
    two = samples.copy()
    two.loc[two.index[strata][0], "design"] = first.replace(
        f"judge-strata:{name}:", f"judge-strata:{'b' if name == 'a' else 'a'}:"
    )
    two.to_csv(root / "samples.tsv", sep="\t", index=False)
    problem = unsupported(read_small_tables(Bundle(root)))
    assert problem == (
        "rounds drawn --by-judge by several judges (the engine plans one judge's levels)"
    )
    uncertain = samples.assign(design=np.where(strata, "judge-uncertainty", samples["design"]))
    uncertain.to_csv(root / "samples.tsv", sep="\t", index=False)
    args = ["--adaptive", "--target-width", "0.1", "--system", "A", "--seed", "1"]
    result = _sample(root, *args, "--out-of-core")
    assert result.exit_code == 2, result.output
    assert "does not plan --adaptive with rounds of the judge-uncertainty design" in result.output


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_judge_grading_a_fact_twice_is_the_loaders_error_line(tmp_path, adaptive):
    """`sample --by-judge` (and with --adaptive) out of core: a judge giving one fact two
    scores (answers equal once normalised) is the in-memory error line, file line and the
    loader's fact id."""
    roots = {k: correlated(with_judge(make_bundle(tmp_path / k))) for k in ("memory", "engine")}
    for root in roots.values():
        judge = pd.read_csv(root / "judge.tsv", sep="\t", dtype=str)
        twice = judge.iloc[[3]].assign(answer=" " + judge["answer"].iloc[3].upper() + " ",
                                       judge_score="0.123")  # fmt: skip
        pd.concat([judge, twice]).to_csv(root / "judge.tsv", sep="\t", index=False)
    plan = ["--adaptive", "--target-width", "0.15", "--system", "A"] if adaptive else [
        "--per-system", "3"]  # fmt: skip
    flags = {"memory": "--in-memory", "engine": "--out-of-core"}
    results = {k: _sample(root, *plan, "--by-judge", "--seed", "2", flags[k])
               for k, root in roots.items()}  # fmt: skip
    lines = {k: r.output.replace(str(roots[k]), "ROOT") for k, r in results.items()}
    assert results["memory"].exit_code == results["engine"].exit_code == 2
    assert "one judge gives one score per fact" in lines["memory"]
    assert lines["engine"] == lines["memory"]


@pytest.mark.slow
@needs_spark
def test_spark_plans_the_judge_designs_as_duckdb(tmp_path):
    """Rounds drawn --by-judge, classes and the --by-judge plan: Spark's plan is DuckDB's."""
    from receval.engine.adaptive import adaptive_sizes

    root = _bundle(tmp_path / "b", "strata-drawn-graded-classes")
    plans = [
        adaptive_sizes(Bundle(root), 0.15, systems=["A", "C"], by_judge=True, engine=name)
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(plans[1], plans[0], rtol=1e-9)
    er = _bundle(tmp_path / "er", "classes-entity-relation")
    plans = [
        adaptive_sizes(
            Bundle(er), 0.15, systems=["B", "D"], distribution="entity-relation", engine=name
        )
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(plans[1], plans[0], rtol=1e-9)
