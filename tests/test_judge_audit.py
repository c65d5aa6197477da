"""The judge audit (receval/judge_audit.py): the favouritism test flags a favoured system and
nothing in a null world, κ and α against hand computations, imputed counts, judge.csv through
``receval score``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.judge_audit import (
    AUDIT_COLUMNS,
    cohen_kappa,
    holm,
    interval_alpha,
    stratified_permutation_test,
)

LEVEL = 0.95


def world(seed: int, favoured: int | None = None, shift: float = 1.0, m: int = 8, n: int = 20):
    """Labelled facts of a constructed campaign: (scores on [0, 1], strata, member, labels).

    Ten queries of 60 facts (share correct 0.2–0.8 by query); m systems of very different
    precision (odds of outputting a wrong fact 0.3–3× a correct one) with overlapping outputs;
    a judge grading 0–4 from the label, a per-query leniency and noise; ``favoured``'s facts
    graded ``shift`` grades higher.  Each system's ``n`` uniform draws are labelled."""
    rng = np.random.default_rng(seed)
    queries, per = 10, 60
    F = queries * per
    query = np.repeat(np.arange(queries), per)
    label = rng.random(F) < rng.uniform(0.2, 0.8, queries)[query]
    odds = rng.uniform(0.3, 3.0, m)
    member = rng.random((F, m)) < np.where(label[:, None], 0.25, 0.25 / odds[None, :])
    latent = 1.0 + 1.8 * label + rng.normal(0, 0.7, queries)[query] + rng.normal(0, 1, F)
    grade = np.clip(np.round(latent), 0, 4)
    if favoured is not None:
        grade = np.minimum(grade + shift * member[:, favoured], 4)
    drawn = np.zeros(F, bool)
    for i in range(m):
        own = np.flatnonzero(member[:, i])
        drawn[rng.choice(own, size=min(n, own.size), replace=False)] = True
    strata = query * 2 + label
    return grade[drawn] / 4.0, strata[drawn], member[drawn], label[drawn].astype(float)


def flagged(values, strata, member, seed: int = 0, permutations: int = 1999) -> np.ndarray:
    rng = np.random.default_rng(seed)
    _, p = stratified_permutation_test(values, strata, member, rng, permutations)
    return holm(p) < 1 - LEVEL


def test_a_favoured_system_is_flagged_and_a_null_world_flags_none():
    s, strata, member, _ = world(3, favoured=2)
    hit = flagged(s, strata, member)
    assert hit[2]
    s, strata, member, _ = world(3)
    assert not flagged(s, strata, member).any()


def test_the_raw_residual_would_flag_systems_of_different_precision():
    """Why the test compares facts of the same human label: the raw residual s − f of a
    judge short of perfect is negative on correct facts and positive on wrong ones, so
    comparing systems' mean residuals flags the precise and the imprecise ones."""
    s, strata, member, label = world(3)
    query = strata // 2
    assert flagged(s - label, query, member).any()
    assert not flagged(s, strata, member).any()


def test_excess_is_the_mean_within_stratum_excess_and_p_is_exact_for_a_tiny_case():
    values = np.array([1.0, 0.0, 0.5, 0.5])
    strata = np.array([0, 0, 1, 1])
    member = np.array([[True], [False], [True], [False]])
    excess, p = stratified_permutation_test(values, strata, member, np.random.default_rng(0), 4000)
    assert excess[0] == pytest.approx((0.5 + 0.0) / 2)
    # of the 2 × 2 equally likely within-stratum arrangements, |T*| ≥ |T| = 0.5 in all four
    assert p[0] == pytest.approx(1.0)
    none = stratified_permutation_test(
        values, strata, np.zeros((4, 1), bool), np.random.default_rng(0)
    )
    assert np.isnan(none[0][0]) and np.isnan(none[1][0])


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, 0.04, 0.03, 0.5, np.nan, 0.001])
    ok = np.isfinite(p)
    expected = multipletests(p[ok], method="holm")[1]
    assert np.allclose(holm(p)[ok], expected)
    assert np.isnan(holm(p)[4])


def test_cohen_kappa_by_hand():
    # 2 × 2 table: both yes 20, a yes b no 5, a no b yes 10, both no 15 (n = 50)
    a = np.r_[np.ones(25), np.zeros(25)].astype(bool)
    b = np.r_[np.ones(20), np.zeros(5), np.ones(10), np.zeros(15)].astype(bool)
    po = 35 / 50
    pe = (25 / 50) * (30 / 50) + (25 / 50) * (20 / 50)
    assert cohen_kappa(a, b) == pytest.approx((po - pe) / (1 - pe))
    assert np.isnan(cohen_kappa(np.ones(3, bool), np.ones(3, bool)))


def test_interval_alpha_by_hand_and_against_the_package():
    import krippendorff

    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 30) / 4.0
    b = np.clip(a + rng.normal(0, 0.3, 30), 0, 1)
    values = np.r_[a, b]
    n = values.size
    d_o = 2 * np.sum((a - b) ** 2) / n  # each item's two ordered pairs, m_u − 1 = 1
    d_e = np.sum((values[:, None] - values[None, :]) ** 2) / (n * (n - 1))
    assert interval_alpha(np.stack([a, b])) == pytest.approx(1 - d_o / d_e)
    three = np.stack([a, b, rng.random(30)])
    three[2, :5] = np.nan
    assert interval_alpha(three) == pytest.approx(
        krippendorff.alpha(reliability_data=three, level_of_measurement="interval")
    )
    assert np.isnan(interval_alpha(np.ones((2, 5))))


def test_interval_alpha_of_continuous_scores_needs_no_values_by_values_array():
    """Continuous judge scores (every value distinct): the closed form takes O(raters × items)
    (the package's coincidence array would be items × values² — 8 TB here); two raters that
    differ by noise of variance 0.01 around a uniform score: D_o = 0.01, D_e = 2 × the pooled
    variance (1/12 + 0.005), α ≈ 0.943."""
    rng = np.random.default_rng(2)
    x = rng.random(20_000)
    alpha = interval_alpha(np.stack([x, x + rng.normal(0, 0.1, x.size)]))
    assert alpha == pytest.approx(1 - 0.01 / (2 * (1 / 12 + 0.005)), abs=0.01)


GRADED = (
    "query_id\tanswer\tjudge_score\tjudge\n"
    "q1\tParis\t3\tumbrela\n"
    "q2\tRome\t2\tumbrela\n"
    "q2\tMilan\t0\tumbrela\n"
    "q1\tParis\t0.9\tllm\n"
    "q2\tRome\t0.7\tllm\n"
)
SCALES = "[judge]\nscale = [0, 3]\n\n[judge.scales]\nllm = [0, 1]\n"


def score(tmp_path, estimator: str, files: dict | None = None):
    root = make_bundle(tmp_path, f"b-{estimator}", files=files)
    out = tmp_path / f"o-{estimator}"
    args = ["score", str(root), "--out", str(out), "--estimator", estimator, "--bootstrap", "100"]
    result = CliRunner().invoke(cli, [*args, "--seed", "4"])
    assert result.exit_code == 0, result.output
    return out


def test_judge_csv_from_receval_score_with_imputed_counts(tmp_path):
    out = score(tmp_path, "ppi", {"judge.tsv": GRADED, "task.toml": SCALES})
    frame = pd.read_csv(out / "judge.csv", keep_default_na=False, na_values=[""])
    assert list(frame.columns) == AUDIT_COLUMNS
    rows = {(r.judge, r.system): r for r in frame.itertuples()}
    # umbrela did not grade Barcelona (A) and Madrid (B): one output each, two pool facts
    assert rows[("umbrela", "A")].imputed_facts == 1
    assert rows[("umbrela", "B")].imputed_facts == 1
    assert rows[("umbrela", "all")].imputed_facts == 2
    assert rows[("llm", "B")].imputed_facts == 2  # Milan and Madrid
    assert "2 pool facts not graded" in rows[("umbrela", "all")].note
    # implied precision: Paris 1, Rome 2/3, Barcelona imputed with the mean (1 + 2/3 + 0)/3
    assert rows[("umbrela", "A")].implied_precision == pytest.approx((1 + 2 / 3 + 5 / 9) / 3)
    a = rows[("umbrela", "A")]
    assert a.residual == pytest.approx(a.implied_precision - a.precision, abs=1e-5)
    assert a.residual_lo == pytest.approx(a.implied_precision - a.precision_hi, abs=1e-5)
    # two judges: ppi's worth is that of their combination
    assert set(frame.loc[frame["judge"] == "combined", "system"]) == {"A", "B"}
    assert frame.loc[frame["judge"] == "combined", "width_ratio"].notna().all()
    block = json.loads((out / "run.json").read_text())["judge_audit"]
    assert set(block["judges"]) == {"llm", "umbrela"}
    assert block["judges"]["umbrela"]["imputed_pool_facts"] == 2
    assert "Holm" in block["test"]
    page = (out / "report.html").read_text()
    assert 'id="judge-audit"' in page


def test_joint_run_with_a_judge_writes_the_audit_without_worth(tmp_path):
    judge = "query_id\tanswer\tjudge_score\nq1\tParis\t0.9\nq2\tRome\t0.8\nq2\tMilan\t0.2\n"
    out = score(tmp_path, "joint", {"judge.tsv": judge})
    frame = pd.read_csv(out / "judge.csv")
    assert frame["labels_saved"].isna().all()
    assert "measured by --estimator ppi only" in frame.loc[frame["system"] == "all", "note"].iloc[0]


def test_no_judge_no_judge_csv(tmp_path):
    out = score(tmp_path, "joint")
    assert not (out / "judge.csv").exists()
    assert "judge_audit" not in json.loads((out / "run.json").read_text())


@pytest.mark.slow
def test_monte_carlo_power_and_null_no_flag_rate():
    """Over 100 constructed campaigns of 30 labels per system: the favoured system (one grade
    higher on its facts) is flagged in ≥ 0.9 of them and a null world flags none in ≥ 0.95
    (less 2 Monte Carlo SE).  With 10 labels per system (≈ 23 labelled facts of the favoured
    system) the power in this world is only ≈ 0.57 (30 campaigns)."""
    reps = 100
    power, clean = [], []
    for r in range(reps):
        s, strata, member, _ = world(100 + r, favoured=0, n=30)
        power.append(flagged(s, strata, member, seed=r, permutations=999)[0])
        s, strata, member, _ = world(100 + r, n=30)
        clean.append(not flagged(s, strata, member, seed=r, permutations=999).any())
    for rate, floor in ((np.mean(power), 0.9), (np.mean(clean), 0.95)):
        se = np.sqrt(floor * (1 - floor) / reps)
        assert rate >= floor - 2 * se, (rate, floor)


def test_the_normal_approximation_has_the_exact_permutation_variance():
    from receval.judge_audit import permutation_normal_test, permutation_variance

    s, strata, member, _ = world(5)
    centred, var = permutation_variance(s, strata, member.astype(float))
    rng = np.random.default_rng(2)
    draws = []
    for _ in range(4000):  # within-stratum shuffles by hand
        shuffled = centred.copy()
        for h in np.unique(strata):
            at = np.flatnonzero(strata == h)
            shuffled[at] = rng.permutation(centred[at])
        draws.append(shuffled @ member)
    # the variance of a sample variance of 4000 near-normal draws: relative SE ≈ 0.022
    assert np.allclose(np.var(draws, axis=0) / var, 1.0, atol=0.09)
    excess, p = permutation_normal_test(s, strata, member)
    assert np.allclose(excess, stratified_permutation_test(s, strata, member, rng, 9)[0])
    assert ((p > 0) & (p <= 1)).all()


def test_report_section_lists_flagged_systems():
    from receval.judge_audit import report_section

    block = {
        "test": "t",
        "level": 0.95,
        "kappa": "k",
        "alpha_all_judges": 0.5,
        "labels_saved_median": None,
        "judges": {
            "umbrela": {
                "kappa": 0.4,
                "alpha": 0.3,
                "labelled_facts": 80,
                "imputed_pool_facts": 0,
                "flagged": {
                    "s00": {"flag": "favours", "excess": 0.2, "p": 0.0005, "p_adjusted": 0.008}
                },
            }
        },
    }
    from receval.run_record import JudgeAuditBlock

    section = report_section(JudgeAuditBlock.from_json(block))
    assert section["rows"][0][-1] == "s00"
    assert section["flagged"] == [["umbrela", "s00", "favours", "0.200", "0.0005", "0.008"]]
    assert report_section(None) is None


@pytest.mark.slow
def test_real_umbrela_grades_favoured_system_flagged_and_null_clean():
    """One campaign of bench/judge_audit.py on the TREC RAG 2025 pairs (real NIST labels, real
    UMBRELA grades, 16 constructed systems, 30 labels each)."""
    from pathlib import Path

    from conftest import load_bench

    if not (Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-rag25-judges").is_dir():
        pytest.skip("../shared/data/trec-rag25-judges is absent")
    result = load_bench("judge_audit").repetition(1, 16, 30, 999)
    assert result["favoured"][0] and not any(result["favoured"][1:])
    assert not any(result["null"])
