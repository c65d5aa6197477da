"""``receval sample --until-decided``: the loop labels, re-scores and stops with "decided"; its
draws are recorded with their design and checked on load; bad options exit 2 with one line."""

from __future__ import annotations

import math
import shutil
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import load_bench

from receval.cli import cli
from receval.formats.bundle import append_rows
from receval.formats.tables import read_table
from receval.simulation import SimulationConfig, simulate_task


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def spread_task(tmp_path_factory):
    """Four systems far apart in precision, a first round of 25 draws each."""
    config = SimulationConfig(
        systems=4, teams=4, queries=30, per_system=25, exhaustive_facts=40,
        precision_range=(0.1, 0.9), uppercase_teams=0.0,
    )  # fmt: skip
    return simulate_task(tmp_path_factory.mktemp("until") / "task", config, seed=3)


def _label_from_truth(root) -> int:
    """Add the truth's label of every fact in to_annotate.tsv to judgments.tsv."""
    truth = read_table(root / "truth.tsv")
    value = dict(
        zip(zip(truth["query_id"], truth["answer"], strict=False), truth["label"], strict=True)
    )
    todo = read_table(root / "to_annotate.tsv")
    todo = todo[todo["kind"] == "fact"]
    labels = [value[(q, a)] for q, a in zip(todo["query_id"], todo["answer"], strict=True)]
    frame = pd.DataFrame(
        {"query_id": todo["query_id"], "answer": todo["answer"], "label": labels}
    ).assign(annotator="truth")
    append_rows(root, "judgments", frame)
    return len(frame)


def test_the_loop_labels_rescores_and_stops_decided(spread_task, tmp_path):
    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    first = len(read_table(root / "samples.tsv"))
    said = ""
    for step in range(12):
        out = invoke("sample", root, "--until-decided", "--batch", 60, "--seed", 5,
                     "--rank-by", "precision", "--budget", first + 240)  # fmt: skip
        assert out.exit_code == 0, out.output
        said = out.output.strip()
        if "decided" in said:
            break
        assert said.startswith("sample round-")
        _label_from_truth(root)
        score = invoke("score", root, "--out", tmp_path / f"out{step}", "--intervals", "anytime",
                       "--rank-by", "precision")  # fmt: skip
        assert score.exit_code == 0, score.output
        board = pd.read_csv(tmp_path / f"out{step}" / "leaderboard.csv")
        assert board["interval"].str.contains("anytime").all()
        check = pd.read_csv(tmp_path / f"out{step}" / "truth_check.csv")
        assert check["covered"].mean() >= 0.9
    assert said.startswith("decided") and len(said.splitlines()) == 1
    samples = read_table(root / "samples.tsv")
    assert len(samples) <= first + 240
    floor = pd.to_numeric(samples["mixture_prob"], errors="coerce")
    assert floor.notna().any() and (floor.dropna() > 0).all()
    # nothing new is drawn once decided
    again = invoke("sample", root, "--until-decided", "--batch", 60, "--seed", 6,
                   "--rank-by", "precision", "--budget", first + 240)  # fmt: skip
    assert again.exit_code == 0 and "decided" in again.output
    assert len(read_table(root / "samples.tsv")) == len(samples)


def test_a_mixture_prob_the_design_cannot_give_is_an_error_naming_the_line(spread_task, tmp_path):
    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    out = invoke("sample", root, "--until-decided", "--batch", 40, "--seed", 1)
    assert out.exit_code == 0, out.output
    _label_from_truth(root)
    samples = read_table(root / "samples.tsv").drop(columns=["_line"])
    floor = np.flatnonzero(pd.to_numeric(samples["mixture_prob"], errors="coerce").notna())
    samples.loc[floor[0], "mixture_prob"] = "0.5"
    samples.to_csv(root / "samples.tsv", sep="\t", index=False)
    bad = invoke("score", root, "--out", tmp_path / "o", "--intervals", "anytime")
    assert bad.exit_code == 2
    lines = bad.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert f"samples.tsv:{floor[0] + 2}" in lines[0] and "mixture_prob" in lines[0]


def test_without_exhaustive_units_f1_stops_decided_and_says_how_to_go_on(spread_task, tmp_path):
    """The default rank key, f1, needs exhaustive units: after the first round the loop says
    ``decided`` (nothing can help f1) in one line naming the keys that go on without them, with
    no warning; ranked by precision it draws."""
    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    for name in ("exhaustive.tsv", "exhaustive_units.tsv"):
        (root / name).unlink(missing_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = invoke("sample", root, "--until-decided", "--batch", 40, "--seed", 1)
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("decided: no draw can help")
    assert "--rank-by precision" in lines[0]
    drawn = invoke("sample", root, "--until-decided", "--batch", 40, "--seed", 1,
                   "--rank-by", "precision")  # fmt: skip
    assert drawn.exit_code == 0 and drawn.output.startswith("sample round-"), drawn.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--until-decided", "--batch", "10", "--per-system", "4"), "--per-system does not apply"),
        (("--until-decided", "--batch", "10", "--name", "r9"), "--name does not apply"),
        (("--until-decided", "--batch", "10", "--adaptive"), "--adaptive does not apply"),
        (("--per-system", "4", "--batch", "10"), "--batch applies only with --until-decided"),
        (("--per-system", "4", "--rank-by", "precision"), "--rank-by applies only"),
        (("--per-system", "4", "--target", "macro"), "--target applies only"),
        (("--per-system", "4", "--top", "2"), "--top applies only"),
        (("--until-decided", "--batch", "10", "--top", "0"), "--top 0 must be an integer"),
        (("--until-decided", "--batch", "10", "--top", "4"), "from 1 to 3"),
        (("--until-decided", "--batch", "10", "--target", "mean"), "--target"),
        (("--per-system", "4", "--confidence", "0.9"), "--confidence applies only with"),
        (("--per-system", "4", "--target-width", "0.05"), "--target-width applies only"),
    ],
)
def test_options_the_round_would_ignore_exit_2_naming_them(spread_task, args, said):
    """An option the chosen kind of round would silently ignore is a usage error (exit 2, one
    line naming it), and nothing is written."""
    before = (spread_task / "samples.tsv").read_bytes()
    out = invoke("sample", spread_task, "--seed", 1, *args)
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], lines
    assert (spread_task / "samples.tsv").read_bytes() == before


def test_until_decided_by_the_macro_average(spread_task, tmp_path):
    """``--target macro`` decides the comparisons of the macro-averaged metric (score
    --target macro), drawing toward its open pairs; the API refuses until-decided options
    without until_decided."""
    import receval

    drawn = receval.sample(spread_task, until_decided=True, batch=40, seed=2,
                           rank_by="precision", target="macro")  # fmt: skip
    assert not drawn.decided and len(drawn.samples) == 40
    assert drawn.decisions.pairs == 6
    with pytest.raises(ValueError, match="target"):
        receval.sample(spread_task, until_decided=True, batch=40, seed=2, target="mean")
    with pytest.raises(ValueError, match="batch applies only"):
        receval.sample(spread_task, 5, seed=2, batch=40)


@pytest.mark.parametrize(
    "args",
    [("--batch", "0"), ("--batch", "5", "--confidence", "1.5"), ("--batch", "-3")],
)
def test_bad_options_exit_2_with_one_error_line(spread_task, args):
    out = invoke("sample", spread_task, "--until-decided", "--seed", 1, *args)
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")


def test_api_checks_batch_and_confidence(spread_task):
    import receval

    with pytest.raises(ValueError, match="batch"):
        receval.sample(spread_task, until_decided=True, batch=0, seed=1)
    with pytest.raises(ValueError, match="confidence"):
        receval.sample(spread_task, until_decided=True, batch=5, seed=1, confidence=1.0)


@pytest.mark.slow
def test_null_world_over_eight_looks_keeps_tiers_and_coverage(tmp_path):
    """bench/anytime.py's null study on a short run: 12 systems of equal precision, a first
    until-decided round and 8 more, scored after every round."""
    import math

    bench = load_bench("anytime")
    reps = 8
    out = bench.null_study(12, reps, 2, tmp_path)
    assert out["split"].mean() <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)
    for metric, covered in out["covered"].items():  # per-repetition shares
        se = np.std(covered, ddof=1) / math.sqrt(reps)
        assert np.mean(covered) >= 0.95 - 2 * max(se, math.sqrt(0.05 * 0.95 / (12 * reps))), metric


@pytest.mark.slow
def test_gradient_world_orders_decided_pairs_rightly_and_saves_labels(tmp_path):
    """bench/anytime.py's gradient study, short: no decided pair is wrongly ordered, and the
    equal design needs more labels than the loop for the loop's pairs."""

    bench = load_bench("anytime")
    out = bench.gradient_study(2, 1, tmp_path, rounds=5)
    assert out["wrong"].sum() == 0
    assert (out["decided"] >= 10).all()
    assert np.all(out["used"] <= np.abs(out["equal_used"]))


@pytest.mark.slow
def test_the_label_ratio_controls_and_the_top_k_study_run(tmp_path):
    """bench/anytime.py's controls (a fixed design told the true values; a loop racing
    nothing) give finite ratios, and ``--top 4`` in the gradient world decides the true best
    four without a look against the truth."""
    bench = load_bench("anytime")
    out = bench.gradient_study(1, 1, tmp_path, rounds=4, widths=False, controls=True)
    assert np.isfinite(out["control_ratio"]).all() and (out["control_ratio"] > 0).all()
    assert np.isfinite(out["oracle_used"]).all() and (np.abs(out["oracle_used"]) > 0).all()
    args = SimpleNamespace(seed=1, equal_rounds=12, top=4)
    top = bench._top_of("gradient", 1, args, tmp_path / "top")
    assert top["wrong"].sum() == 0 and top["decided"].all()


@pytest.mark.slow
@pytest.mark.parametrize("world", ["parabank", "msmarco"])
def test_on_real_labels_the_loop_orders_pairs_rightly_and_covers_at_every_look(world):
    """bench/anytime.py's loop on real labels (ParaBank-Eval: 36 systems; Chaganty et al.'s MS
    MARCO answers: 5 systems; every pooled output judged by people), short: no decided pair
    against the true precisions, and the precision and pooled-recall intervals of nearly every
    system cover the truth at every look."""
    bench = load_bench("anytime")
    out = bench.real_study(world, 2, 1, equal_rounds=4, widths=False, rounds=4)
    if out is None:
        pytest.skip(f"the {world} data in ../shared/data are absent")
    assert out["wrong"].sum() == 0 and out["decided"].sum() >= 1
    pairs = 2 * int(out["systems"][0])  # (repetition, system) pairs
    for metric in ("precision", "pooled_recall"):
        floor = 0.95 - 2 * math.sqrt(0.05 * 0.95 / pairs)
        assert out[f"covered {metric}"].mean() >= floor, metric


@pytest.mark.parametrize("key", ["f1", "recall"])
def test_ranked_by_f1_or_recall_the_loop_decides_pairs_in_the_truths_order(
    spread_task, tmp_path, key
):
    """F1 (the default key; paired tests with the true facts' sequence at both ends) and recall
    (the correct-output terms): pairs decided after a few rounds, every decided pair in the
    order of the truth's value, and run.json says which procedure ranked it."""
    import json

    from receval.estimators.anytime.method import anytime_pair_tests
    from receval.estimators.sample_data import build_sample_data
    from receval.scoring import true_metrics
    from receval.task import load_task

    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    for _ in range(4):
        out = invoke("sample", root, "--until-decided", "--batch", 80, "--seed", 2,
                     "--rank-by", key)  # fmt: skip
        assert out.exit_code == 0, out.output
        if "decided" in out.output:
            break
        _label_from_truth(root)
    score = invoke("score", root, "--out", tmp_path / "o", "--intervals", "anytime",
                   "--rank-by", key)  # fmt: skip
    assert score.exit_code == 0, score.output
    board = pd.read_csv(tmp_path / "o" / "leaderboard.csv").set_index("system")
    task = load_task(root)
    truth = true_metrics(task)[key]
    data = build_sample_data(task)
    tests = anytime_pair_tests(task, data, key, data.sizes > 0, 0.05)
    rows, cols = np.nonzero(tests.better)
    better = [(data.systems[a], data.systems[b]) for a, b in zip(rows, cols, strict=True)]
    assert better  # some pair decided (which one depends on the loop's path)
    assert all(truth[a] > truth[b] for a, b in better), better
    for a in board.index:  # a tier above another is a decided pair: right by the truth
        for b in board.index:
            if (
                board.loc[a, "tier"] < board.loc[b, "tier"]
                and board.loc[a, "rank_hi"] < board.loc[b, "rank_lo"]
            ):
                assert truth[a] > truth[b], (a, b)
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert "f1" in json.dumps(run["intervals"]["splits"])


@pytest.mark.slow
def test_gradient_world_ranked_by_f1_orders_decided_pairs_rightly(tmp_path):
    """bench/anytime.py's gradient study ranked by F1, short: no decided pair is wrongly ordered
    by the truth's F1, and some are decided."""
    bench = load_bench("anytime")
    out = bench.gradient_study(2, 1, tmp_path, rounds=5, widths=False, rank_by="f1")
    assert out["wrong"].sum() == 0
    assert (out["decided"] >= 1).all()


def test_a_fixed_round_draws_its_focus_in_proportion_to_the_weights(spread_task):
    """``fixed_round`` (the benchmark's fixed designs): equal focus counts by default, counts in
    proportion to the weights when given (a zero weight: floor draws only)."""
    from receval.task import load_task
    from receval.until_decided import fixed_round

    task = load_task(spread_task)
    weights = np.array([3.0, 1.0, 0.0, 0.0])
    for given, expect in ((None, [20, 20, 20, 20]), (weights, [60, 20, 0, 0])):
        drawn = fixed_round(task, 100, seed=4, weights=given).samples
        focus = drawn[drawn["mixture_prob"].isna()]
        counts = focus.groupby("system").size().reindex(task.systems).fillna(0)
        assert counts.tolist() == expect
        assert len(drawn) == 100


def test_the_told_design_weighs_a_shared_middle_system_as_the_normal_optimum_does():
    """bench/anytime.py's ``oracle_weights``: precisions 0.8, 0.5, 0.2 and the two adjacent
    pairs; minimising n0 + n1 + n2 under v0/n0 + v1/n1 <= 0.09 (and its mirror) gives
    n0 / n1 = sqrt(v0 / (2 v1)) by Lagrange (n1 serves both pairs); a system in no pair gets nothing."""
    bench = load_bench("anytime")
    truth = pd.DataFrame({"precision": [0.8, 0.5, 0.2, 0.6]}, index=list("abcd"))
    weight = bench.oracle_weights(truth, {("a", "b"), ("b", "c")}, list("abcd"))
    assert weight[3] == 0.0
    assert weight[0] / weight[1] == pytest.approx(math.sqrt(0.16 / (2 * 0.25)), rel=1e-3)
    assert weight[0] == pytest.approx(weight[2], rel=1e-3)
    assert 0.16 / weight[0] + 0.25 / weight[1] == pytest.approx(0.09, rel=1e-3)


def test_until_the_top_k_are_decided_the_loop_stops_naming_them(spread_task, tmp_path):
    """``--top 2``: the loop draws toward the pairs that settle which systems are the best two,
    stops with one 'decided' line naming them (the truth's best two), and leaves the order
    inside and outside open: the full ranking is still drawing then."""
    import receval

    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    truth = receval.score(root, rank_by="precision").truth_check
    best = truth.loc[truth["metric"] == "precision"].nlargest(2, "true")["system"]
    said = ""
    for _ in range(16):
        out = invoke("sample", root, "--until-decided", "--batch", 60, "--seed", 3,
                     "--rank-by", "precision", "--top", 2)  # fmt: skip
        assert out.exit_code == 0, out.output
        said = out.output.strip()
        if said.startswith("decided"):
            break
        assert "top-2 membership" in said
        if "surely among the best 2: " in said:  # progress: named before the stop, truly best
            settled = said.split("surely among the best 2: ")[1].split(";")[0].split(", ")
            assert set(settled) <= set(best), said
        _label_from_truth(root)
    assert said.startswith("decided: the top 2 by precision are separated from the rest")
    assert len(said.splitlines()) == 1
    named = said.split(": ")[-1].removesuffix("; nothing drawn").split(", ")
    assert sorted(named) == sorted(best), said
    full = receval.sample(root, until_decided=True, batch=60, seed=3, rank_by="precision")
    assert not full.decided  # the order inside the top two is not settled yet


def test_top_k_membership_reads_the_decided_pairs():
    """A system is surely in the top K when better than S − K others, surely out when K are
    better than it; the open pairs are the undecided ones across the points' boundary that
    touch an unsure system."""
    from receval.until_decided import membership_open

    better = np.zeros((4, 4), bool)
    better[0, [2, 3]] = better[1, 3] = True  # 0 beats 2, 3; 1 beats 3
    pairs = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    tests = SimpleNamespace(better=better, pairs=pairs)
    point = np.array([0.9, 0.7, 0.6, 0.2])
    still = np.array([0, 3, 5])  # (0, 1), (1, 2), (2, 3) undecided
    sure_in, sure_out, open_ = membership_open(tests, point, np.ones(4, bool), 2, still)
    assert sure_in.tolist() == [True, False, False, False]
    assert sure_out.tolist() == [False, False, False, True]  # 0 and 1 both above 3
    assert pairs[open_].tolist() == [[1, 2]]  # (0, 1) inside the top 2, (2, 3) outside
    sure_in, sure_out, open_ = membership_open(tests, point, np.ones(4, bool), 1, still)
    assert pairs[open_].tolist() == [[0, 1]]
    assert sure_out.tolist() == [False, False, True, True]  # 0 above 2 and 3


def test_pair_weights_favour_the_closest_pairs_or_for_top_k_the_bottleneck():
    """Deciding every pair: the pair closest to being decided weighs most, a pair showing no
    difference nothing.  Deciding top-K membership (all boundary pairs must be decided): the
    hardest pair within 4x the draws so far weighs most, a pair beyond that horizon a tenth of
    the least within it."""
    from receval.until_decided import pair_weights

    need = np.array([100.0, 400.0, 10_000.0, np.inf])
    full = pair_weights(need, False, 500)
    assert full[0] > full[1] > full[2] > 0 and full[3] == 0
    top = pair_weights(need, True, 500)
    assert top[1] > top[0] and top[3] == 0
    assert top[2] == pytest.approx(0.1 * top[0])


def test_classes_learned_while_labelling_keep_every_look_scoring(tmp_path):
    """A null world where a quarter of the true facts have two names, labelled as the README
    asks (a correct answer's class and its aliases among the outputs): the classes appear
    after the draws of earlier rounds were recorded, and every look still scores (no
    mixture_prob error), keeps one tier and covers the truth."""
    bench = load_bench("anytime_classes")
    out = bench.study(4, 1, 3, tmp_path, rounds=2, alias_rate=0.3)
    assert out["errors"] == [""]
    assert out["classes_labelled"][0] >= 3  # classes with two names were labelled
    assert out["looks"] == [3] and not out["split"].any()
    for metric, covered in out["covered"].items():
        assert covered[0] >= 0.75, metric


def test_mixture_prob_is_the_drawn_strings_and_a_class_level_one_still_scores(tmp_path):
    """``mixture_prob`` is q0 of the drawn answer string (not of its class); a bundle written
    before, whose floor rows carry q0 of the class as the labels define it, scores the same."""
    import receval
    from receval.estimators.anytime.stream import drawn_floor_probabilities
    from receval.estimators.classes import canonical_facts
    from receval.task import with_annotation

    bench = load_bench("anytime_classes")
    world, task = bench.alias_world(4, 3, tmp_path, 0.3)
    loop = bench.class_loop(world, task, 20, 7)
    loop.step(40, seed=1, rank_by="precision")
    samples = loop.samples.copy()
    floor = pd.to_numeric(samples["mixture_prob"], errors="coerce").notna().to_numpy()
    facts = loop.task.samples["fact"].to_numpy(np.int64)
    want = drawn_floor_probabilities(loop.task, "uniform", facts[floor])
    assert np.allclose(samples.loc[floor, "mixture_prob"].to_numpy(float), want, rtol=1e-9)
    canon = canonical_facts(loop.task)
    assert canon is not None
    merged = canon[facts] != facts
    merged |= np.isin(facts, canon[canon != np.arange(canon.size)])
    assert (floor & merged).any()  # some floor draw now belongs to a class of two names
    # the class-level q0 the sampler used to write
    every = loop.task.facts.index.to_numpy(np.int64)
    per_fact = drawn_floor_probabilities(loop.task, "uniform", every)
    per_class = np.bincount(canon, weights=per_fact, minlength=canon.size)
    old = samples.copy()
    old.loc[floor, "mixture_prob"] = per_class[canon[facts[floor]]]
    before = receval.score(loop.task, intervals="anytime", rank_by="precision").leaderboard
    task_old = with_annotation(loop.base, samples=old, judgments=loop.task.judgments,
                               exhaustive_units=loop.units, exhaustive=loop.exhaustive)  # fmt: skip
    after = receval.score(task_old, intervals="anytime", rank_by="precision").leaderboard
    pd.testing.assert_frame_equal(before, after)


@pytest.mark.slow
def test_classes_learned_while_labelling_null_world_over_eight_looks(tmp_path):
    """bench/anytime_classes.py, short: 12 systems of equal precision, a quarter of the true
    facts with two names, 8 until-decided rounds after the first: no error, tiers never split
    beyond 0.05 + 2 SE, coverage at every look >= 0.95 - 2 SE per metric."""
    bench = load_bench("anytime_classes")
    reps = 6
    out = bench.study(12, reps, 1, tmp_path, rounds=8, alias_rate=0.25)
    figures = bench.summarise(out, 12)
    assert figures["errors"] == 0, figures["first_error"]
    assert figures["split_pass"]
    for metric, c in figures["covered"].items():
        assert c["pass"], (metric, c)


def test_the_loop_scores_through_the_pipeline_with_the_users_estimator(spread_task, tmp_path):
    """`sample --until-decided --estimator E` decides with E's points (as `score --estimator E
    --intervals anytime`); a census is refused with one error line."""
    import receval
    from receval.task import load_task
    from receval.until_decided import decisions

    root = tmp_path / "task"
    shutil.copytree(spread_task, root)
    task = load_task(root)
    simple = decisions(task, "precision", estimator="simple")
    scored = receval.score(task, estimator="simple", intervals="anytime", rank_by="precision")
    board = scored.leaderboard.set_index("system")
    expected = board.loc[simple.systems, "precision"].to_numpy(float)
    assert np.allclose(simple.point, expected, equal_nan=True)
    result = invoke("sample", root, "--until-decided", "--batch", "10", "--seed", "1",
                    "--estimator", "official")  # fmt: skip
    assert result.exit_code == 2 and "needs a sample-based estimator" in result.output
    result = invoke("sample", root, "--per-system", "5", "--seed", "1", "--estimator", "simple")
    assert (
        result.exit_code == 2 and "--estimator applies only with --until-decided" in result.output
    )


def test_with_ppi_and_a_judge_the_loop_decides_with_the_judge(tmp_path):
    """The same labels, a judge that predicts them: `--estimator ppi` leaves fewer pairs open
    than joint (fixed-seed world: 4 systems far apart, 40 draws each; 6 → 4 open pairs by
    precision), and f1's comparisons take the judge's terms too."""
    from receval.task import load_task
    from receval.until_decided import decisions

    config = SimulationConfig(
        systems=4, teams=4, queries=30, per_system=40, exhaustive_facts=40,
        precision_range=(0.1, 0.9), uppercase_teams=0.0,
    )  # fmt: skip
    root = simulate_task(tmp_path / "task", config, seed=3)
    truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str)
    correct = truth["label"].str.lower().isin(["c", "correct", "1", "true", "yes"])
    judge = truth[["query_id", "answer"]].assign(judge_score=correct.astype(float))
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    task = load_task(root)
    joint = decisions(task, "precision", estimator="joint")
    ppi = decisions(task, "precision", estimator="ppi")
    assert len(ppi.open_pairs) < len(joint.open_pairs)
    f1 = decisions(task, "f1", estimator="ppi")
    assert len(f1.open_pairs) <= 6 and np.isfinite(f1.point).all()
