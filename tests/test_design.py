"""Sampling designs: draws follow the declared distribution, probabilities are recorded, rounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from receval.design import draw_precision_samples, infer_designs, sampling_probabilities
from receval.simulation import SimulationConfig, simulate_task
from receval.task import load_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = simulate_task(
        tmp_path_factory.mktemp("design") / "t", SimulationConfig(systems=5, queries=40), seed=8
    )
    return load_task(root)


@pytest.mark.parametrize("distribution", ["uniform", "entity-relation"])
def test_draws_follow_the_distribution_and_record_its_probabilities(task, distribution):
    system = task.systems[0]
    n = 100_000
    drawn = draw_precision_samples(
        task.outputs, task.queries, {system: n}, np.random.default_rng(1), distribution=distribution
    )
    assert (drawn["system"] == system).all() and len(drawn) == n
    out = task.outputs[task.outputs["system"] == system]
    p = sampling_probabilities(task.outputs, task.queries, distribution).loc[out.index].to_numpy()
    assert np.isclose(p.sum(), 1.0)
    key = pd.MultiIndex.from_frame(out[["query_id", "answer_raw"]])
    freq = drawn.groupby(["query_id", "answer"]).size().reindex(key).fillna(0).to_numpy() / n
    z = (freq - p) / np.sqrt(p * (1 - p) / n)
    # Bonferroni over the system's facts: P(max |z| > 5) < facts × 5.7e-7
    assert np.abs(z).max() < 5, np.abs(z).max()
    recorded = drawn.set_index(["query_id", "answer"])["prob"]
    np.testing.assert_allclose(
        recorded.to_numpy(), pd.Series(p, index=key).reindex(recorded.index).to_numpy()
    )


def test_draws_are_a_function_of_the_generator_and_systems_are_independent_of_order(task):
    a = draw_precision_samples(task.outputs, task.queries, 30, np.random.default_rng(5))
    b = draw_precision_samples(task.outputs, task.queries, 30, np.random.default_rng(5))
    pd.testing.assert_frame_equal(a, b)
    assert list(a.groupby("system", sort=False).size().index) == sorted(task.systems)
    assert (a.groupby("system")["draw"].max() == 30).all()


def test_recorded_probabilities_are_recognised_and_a_wrong_one_is_refused(task):
    drawn = draw_precision_samples(
        task.outputs, task.queries, 20, np.random.default_rng(2), distribution="entity-relation"
    )
    from receval.task import with_annotation

    recorded = with_annotation(task, samples=drawn.drop(columns=["design"]))
    samplers = infer_designs(recorded.samples, recorded.outputs, recorded.queries, "samples.tsv")
    assert {s.design for s in samplers} == {"entity-relation"}
    bad = drawn.drop(columns=["design"]).copy()
    first = bad["system"] == bad["system"].iloc[0]
    bad.loc[first, "prob"] = bad.loc[first, "prob"] * 2  # consistent, but no design gives it
    broken = with_annotation(task, samples=bad)
    with pytest.raises(ValueError, match="disagrees with the"):
        infer_designs(broken.samples, broken.outputs, broken.queries, "samples.tsv")


def test_weighted_units_are_drawn_with_replacement_and_weights_are_exact():
    # Hansen–Hurwitz: E[Σ_draws a_u / p_u] = m · Σ_u a_u for any weights, over several rounds
    from receval.design import UNIT_DESIGN_PPS, draw_exhaustive_units, unit_weights

    rng = np.random.default_rng(7)
    a = rng.poisson(3.0, 40).astype(float)
    candidates = pd.DataFrame({"unit": [f"d{k}" for k in range(40)], "prob": 1.0 + a})
    R, m = 1000, 6
    totals = np.empty(R)
    for r in range(R):
        rounds = [draw_exhaustive_units(candidates, m, rng, exclude={"d0"}) for _ in range(2)]
        units = (
            pd.concat(rounds)
            .groupby("unit", sort=False)
            .agg(prob=("prob", "first"), draws=("draws", "sum"), design=("design", "first"))
        )
        assert (units["design"] == UNIT_DESIGN_PPS).all()
        w = unit_weights(units.reset_index())
        totals[r] = np.sum(w * a[units.index.str[1:].astype(int)]) / (2 * m)
    # the mean of R independent HH estimates is within 4 of its standard errors of the total
    assert abs(totals.mean() - a.sum()) < 4 * totals.std(ddof=1) / np.sqrt(R)


def test_unit_weights_read_the_recorded_design():
    from receval.design import unit_weights

    units = pd.DataFrame(
        {
            "unit": ["a", "b", "c", "d"],
            "prob": [0.1, 0.25, np.nan, 0.5],
            "draws": [2, 1, np.nan, np.nan],
            "design": ["pps-wr", "pps-wr", "", ""],
        }
    )
    # pps-wr: draws / p; a prob without design: an inclusion probability (1/π); none: 1
    assert np.allclose(unit_weights(units), [20.0, 4.0, 1.0, 2.0])


def test_a_weighted_round_records_draws_and_design_for_exhaustive_units(task):
    from receval.design import new_sample_round

    candidates = pd.DataFrame(
        {"unit": [f"D{k:04d}" for k in range(30)], "prob": np.arange(1, 31.0)}
    )
    drawn = new_sample_round(task, 0, seed=1, units=candidates, exhaustive_units=12)
    units = drawn.to_annotate[drawn.to_annotate["kind"] == "unit"]
    assert units["draws"].sum() == 12 and (units["design"] == "pps-wr").all()
    assert not units["unit"].duplicated().any()
    expected = candidates.set_index("unit")["prob"] / candidates["prob"].sum()
    assert np.allclose(units["prob"].to_numpy(float), expected.reindex(units["unit"]).to_numpy())


def test_a_sampler_with_two_designs_names_the_line_that_differs(tmp_path):
    from click.testing import CliRunner

    from receval.cli import cli

    root = simulate_task(tmp_path / "t", SimulationConfig(systems=3, queries=20), seed=3)
    lines = (root / "samples.tsv").read_text().splitlines()
    column = lines[0].split("\t").index("design")
    fields = lines[5].split("\t")
    assert fields[column] == "uniform"
    fields[column] = "entity-relation"
    lines[5] = "\t".join(fields)
    (root / "samples.tsv").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["score", str(root), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "samples.tsv:6: " in result.output and "'uniform' and 'entity-relation'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_round_is_written_in_a_random_order_and_says_so(task):
    """``sample --per-system``: the hashed draws of (seed, round) (the permutation is hashed
    too, apart from them), in a random order marked ``order`` = random on every row; the same
    seed gives the same rows."""
    from receval.design import hashed_precision_samples, new_sample_round

    drawn = new_sample_round(task, 30, seed=4).samples
    again = new_sample_round(task, 30, seed=4).samples
    pd.testing.assert_frame_equal(drawn, again)
    assert (drawn["order"] == "random").all()
    grouped = hashed_precision_samples(task.outputs, task.queries, 30, seed=4, round_number=2,
                                       sample=drawn["sample"].iloc[0],
                                       raw_outputs=task.raw_outputs)  # fmt: skip
    key = ["system", "draw"]
    pd.testing.assert_frame_equal(
        drawn.drop(columns="order").sort_values(key).reset_index(drop=True),
        grouped.sort_values(key).reset_index(drop=True),
    )
    # not grouped by system any more: the systems alternate
    assert (drawn["system"] != drawn["system"].shift()).sum() > len(task.systems) * 5
