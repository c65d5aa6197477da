"""The simulator: determinism, bundle validity, and the realism the brief asks for.

Realism thresholds are properties of the default configuration (TAC-KBP 2015 scale), checked on
fixed seeds; the statistical test (exhaustive annotation gives unbiased totals) uses a
tolerance derived from the central limit theorem.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.simulation import (
    DEFAULT_TASK_SEED,
    SimulationConfig,
    World,
    simulate_task,
    simulate_world,
    split_seed,
)
from receval.task import load_task

EMBEDDED = Path(__file__).resolve().parents[1] / "data" / "kbp-sim"
SEEDS = (0, 1, 2)
SMALL = SimulationConfig(systems=12, queries=40, teams=4, per_system=30, exhaustive_facts=40)


@pytest.fixture(scope="module")
def worlds() -> dict[int, World]:
    """Default-size worlds (70 systems, 317 queries) for a few seeds."""
    return {seed: simulate_world(SimulationConfig(), split_seed(seed)[0]) for seed in SEEDS}


def _digests(root: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.iterdir())
        if p.is_file()
    }


def _membership(world: World, lo: int, hi: int) -> np.ndarray:
    """(systems × candidates in [lo, hi)) boolean output matrix."""
    keep = (world.output_candidate >= lo) & (world.output_candidate < hi)
    g = np.zeros((len(world.systems), hi - lo), dtype=bool)
    g[world.output_system[keep], world.output_candidate[keep] - lo] = True
    return g


def _jaccard(g: np.ndarray) -> np.ndarray:
    x = g.astype(np.float64)
    inter = x @ x.T
    size = x.sum(axis=1)
    return inter / (size[:, None] + size[None, :] - inter)


# ------------------------------------------------------------------------------- determinism


def test_world_is_a_pure_function_of_the_generator() -> None:
    a = simulate_world(SMALL, np.random.default_rng(7))
    b = simulate_world(SMALL, np.random.default_rng(7))
    c = simulate_world(SMALL, np.random.default_rng(8))
    for name in ("candidate_answer", "candidate_true", "candidate_doc", "output_candidate"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert np.array_equal(a.output_score, b.output_score)
    pd.testing.assert_frame_equal(a.truth_metrics(), b.truth_metrics())
    assert not (
        a.output_candidate.size == c.output_candidate.size
        and np.array_equal(a.output_candidate, c.output_candidate)
    )


def test_annotation_is_seeded_separately_from_the_world() -> None:
    world = simulate_world(SMALL, np.random.default_rng(3))
    first = world.annotate(np.random.default_rng(1))
    again = world.annotate(np.random.default_rng(1))
    other = world.annotate(np.random.default_rng(2))
    for name, frame in first.tables().items():
        pd.testing.assert_frame_equal(frame, again.tables()[name])
    assert not first.samples.equals(other.samples)
    # the world is untouched by annotating it
    fresh = simulate_world(SMALL, np.random.default_rng(3))
    assert np.array_equal(world.output_candidate, fresh.output_candidate)


def test_the_simulated_round_is_in_a_random_order_marked_random() -> None:
    """The campaign's samples are written as ``receval sample`` writes a round: every system's
    draws interleaved in a uniformly random order and marked ``order`` = random, so
    ``--intervals anytime`` reads them draw by draw (not as a legacy round)."""
    world = simulate_world(SMALL, np.random.default_rng(3))
    samples = world.annotate(np.random.default_rng(1)).samples
    assert (samples["order"] == "random").all()
    runs = (samples["system"] != samples["system"].shift()).sum()
    assert runs > len(samples) / 2  # interleaved, not grouped by system (12 groups)
    # each system's draws are the same i.i.d. draws, numbered 1..n, in some order
    for _, rows in samples.groupby("system"):
        assert sorted(rows["draw"].astype(int)) == list(range(1, len(rows) + 1))


def test_the_round_s_order_leaves_the_campaign_s_draws_as_they_were(monkeypatch) -> None:
    """The permutation comes from a child of the generator's seed sequence: the campaign draws
    the same rows, and leaves the generator in the same state, as without it (Monte Carlo
    studies that annotate many times from one generator see the same campaigns)."""
    import receval.simulation as simulation

    world = simulate_world(SMALL, np.random.default_rng(3))
    rng = np.random.default_rng(5)
    shuffled = world.annotate(rng).samples
    after = rng.bit_generator.state
    monkeypatch.setattr(simulation, "in_random_order", lambda frame, gen: frame)
    plain_rng = np.random.default_rng(5)
    plain = world.annotate(plain_rng).samples
    assert plain_rng.bit_generator.state == after
    keys = ["system", "draw"]
    again = shuffled.drop(columns="order").sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(again, plain.sort_values(keys).reset_index(drop=True))


def test_simulate_task_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = simulate_task(tmp_path / "a", SMALL, seed=5)
    b = simulate_task(tmp_path / "b", SMALL, seed=5)
    c = simulate_task(tmp_path / "c", SMALL, seed=6)
    assert _digests(a) == _digests(b)
    assert _digests(a)["runs.tsv"] != _digests(c)["runs.tsv"]


def test_simulate_task_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    out = simulate_task(tmp_path / "t", SMALL, seed=1)
    with pytest.raises(FileExistsError):
        simulate_task(out, SMALL, seed=2)
    simulate_task(out, SMALL, seed=2, overwrite=True)
    assert _digests(out) == _digests(simulate_task(tmp_path / "u", SMALL, seed=2))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"systems": 0},
        {"systems": 3, "teams": 4},
        {"precision_range": (0.7, 0.1)},
        {"recall_range": (0.0, 0.4)},
        {"annotator_error": 0.5},
        {"distribution": "zipf"},
        {"facts_per_query": 0.0},
    ],
)
def test_config_rejects_nonsense(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        SimulationConfig(**kwargs)


# ------------------------------------------------------------------------------- the bundle


def test_bundle_is_valid_and_agrees_with_the_world(tmp_path: Path) -> None:
    config = SimulationConfig(
        systems=20, queries=80, per_system=60, annotators=3, distribution="entity-relation"
    )
    out = simulate_task(tmp_path / "sim", config, seed=11)
    world = simulate_world(config, split_seed(11)[0])
    task = load_task(out)

    assert task.name == "kbp-sim"
    assert task.config.universe_size == world.universe_size
    assert task.systems == sorted(world.systems)
    assert task.teams == dict(zip(world.systems, world.teams, strict=True))
    assert len(task.outputs) == world.output_candidate.size  # one row per (system, fact)
    truth = task.truth.set_index("fact")["value"]
    assert int(truth.sum()) == world.n_true
    # truth lists every output fact, and the loaded outputs have the world's true precision
    assert task.outputs["fact"].isin(truth.index).all()
    precision = (
        task.outputs.assign(y=truth.reindex(task.outputs["fact"]).to_numpy())
        .groupby("system")["y"]
        .mean()
    )
    expected = world.truth_metrics().set_index("system")["precision"]
    np.testing.assert_allclose(precision.sort_index(), expected.sort_index(), rtol=1e-12)
    # noiseless annotators: every merged label equals the truth
    assert len(task.merged.conflicts) == 0
    assert (task.labels == truth.reindex(task.labels.index)).all()
    assert set(task.labels.index) == set(task.samples["fact"])
    # exhaustive annotation lists only true facts, each in its own document
    assert (truth.reindex(task.exhaustive["fact"]) == 1).all()
    assert task.exhaustive["unit"].isin(set(task.exhaustive_units["unit"])).all()
    assert len(task.samples) == config.per_system * config.systems


def test_truth_metrics_are_consistent(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        tm = world.truth_metrics()
        np.testing.assert_allclose(tm["recall"], tm["pooled_recall"] * world.pool_coverage)
        np.testing.assert_allclose(tm["precision"], tm["correct"] / tm["outputs"])
        assert tm["outputs"].sum() == world.output_candidate.size
        # every true fact lives in exactly one document; wrong answers in none
        assert (world.candidate_doc[world.candidate_true] >= 0).all()
        assert (world.candidate_doc[~world.candidate_true] == -1).all()


# ------------------------------------------------------------------------------- realism


def test_scale_resembles_tac_kbp_2015(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        assert len(world.systems) == 70 and len(set(world.teams)) == 18
        assert len(world.queries) == 317
        assert 80_000 <= world.output_candidate.size <= 250_000  # 2015: ~140,000 rows
        assert 20_000 <= world.pool.size <= 70_000  # 2015: ~60,000 distinct outputs


def test_precision_and_recall_lie_in_the_2015_ranges(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        tm = world.truth_metrics()
        assert tm["precision"].between(0.1, 0.7).all()
        assert tm["recall"].between(0.05, 0.4).all()
        # and they spread over the ranges rather than sitting at one value
        assert tm["precision"].max() - tm["precision"].min() > 0.25
        assert tm["recall"].max() - tm["recall"].min() > 0.15


def test_pool_coverage_is_well_below_one(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        assert 0.55 <= world.pool_coverage <= 0.85


def test_team_members_overlap_strongly(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        jac = _jaccard(_membership(world, 0, world.n_true))
        team = np.asarray(world.teams)
        same = team[:, None] == team[None, :]
        np.fill_diagonal(same, False)
        other = team[:, None] != team[None, :]
        within, across = jac[same].mean(), jac[other].mean()
        assert within >= 0.4
        assert within >= 2 * across


def test_wrong_answers_are_shared_across_systems_and_teams(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        g = _membership(world, world.n_true, world.universe_size)
        output = g.any(axis=0)
        systems = g.sum(axis=0)[output]
        _, team_index = np.unique(np.asarray(world.teams), return_inverse=True)
        by_team = np.zeros((team_index.max() + 1, g.shape[1]), dtype=bool)
        np.logical_or.at(by_team, team_index, g)
        teams = by_team.sum(axis=0)[output]
        assert (systems >= 2).mean() >= 0.3
        assert (teams >= 3).mean() >= 0.03
        assert teams.max() >= 5


def test_precision_falls_with_confidence(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        frame = pd.DataFrame(
            {
                "system": world.output_system,
                "correct": world.candidate_true[world.output_candidate],
                "score": world.output_score,
            }
        )
        share = frame.groupby("system")["score"].rank(ascending=False, pct=True, method="first")
        frame["quarter"] = np.minimum((share * 4).astype(int), 3)
        by_quarter = frame.groupby(["system", "quarter"])["correct"].mean().unstack()
        assert (by_quarter[0] > by_quarter[3]).all()  # every system
        assert (by_quarter.mean().diff().dropna() < 0).all()  # on average, quarter by quarter


def test_queries_differ_heavily_in_true_facts(worlds: dict[int, World]) -> None:
    for world in worlds.values():
        counts = np.bincount(
            world.candidate_query[world.candidate_true], minlength=len(world.queries)
        )
        top = np.sort(counts)[::-1][: len(counts) // 10]
        assert top.sum() >= 0.35 * counts.sum()  # the top tenth of queries hold over a third
        assert (counts <= 1).mean() >= 0.15  # many queries have one true fact or none
        assert counts.mean() == pytest.approx(19, rel=0.25)


def test_annotator_errors_flip_labels_at_the_configured_rate() -> None:
    world = simulate_world(SMALL, np.random.default_rng(4))
    error = 0.2
    ann = world.annotate(np.random.default_rng(9), annotators=3, annotator_error=error)
    j = ann.judgments
    true_label = world.candidate_true[world.candidate_ids(j["query_id"], j["answer"])]
    flipped = (j["label"].to_numpy() == "C") != true_label
    n = flipped.size
    # binomial(n, 0.2): 4 standard deviations either side
    assert abs(flipped.sum() - n * error) <= 4 * np.sqrt(n * error * (1 - error))
    assert (j.groupby(["query_id", "answer"]).size() == 3).all()


def test_uniform_documents_give_unbiased_pool_totals() -> None:
    """(D/m) · #(exhaustively found true facts that some system output) estimates |Y| unbiasedly.

    Every true fact lives in one document and documents are drawn uniformly without
    replacement, so each true fact is found with probability m/D.  Over R independent campaigns
    the mean estimate lies within 4 standard errors of |Y| (failure probability < 1e-4 by the
    central limit theorem), and so does the total of all true facts, |𝒴|.
    """
    world = simulate_world(SMALL, np.random.default_rng(12))
    m, d = world.exhaustive_unit_count(), world.documents.size
    pooled = np.zeros(world.universe_size, dtype=bool)
    pooled[world.pool] = True
    rng = np.random.default_rng(13)
    found_pool, found_all = [], []
    for _ in range(300):
        ann = world.annotate(rng, per_system=0)
        ids = world.candidate_ids(ann.exhaustive["query_id"], ann.exhaustive["answer"])
        assert (ids >= 0).all() and world.candidate_true[ids].all()
        assert len(ann.exhaustive_units) == m
        found_all.append(len(ids) * d / m)
        found_pool.append(pooled[ids].sum() * d / m)
    for values, target in (
        (found_pool, world.candidate_true[world.pool].sum()),
        (found_all, world.n_true),
    ):
        values = np.asarray(values)
        se = values.std(ddof=1) / np.sqrt(values.size)
        assert abs(values.mean() - target) <= 4 * se


# ------------------------------------------------------------------------------- embedded default


@pytest.mark.skipif(not EMBEDDED.is_dir(), reason="data/kbp-sim is not present")
def test_embedded_default_task_loads_and_is_reproducible(tmp_path: Path) -> None:
    task = load_task(EMBEDDED)
    summary = task.summary()
    assert summary["task"] == "kbp-sim"
    assert summary["systems"] == 70 and summary["queries"] == 317
    assert summary["truth"] == "yes"
    fresh = simulate_task(tmp_path / "kbp-sim", SimulationConfig(), seed=DEFAULT_TASK_SEED)
    assert _digests(EMBEDDED) == _digests(fresh), (
        "data/kbp-sim differs from simulate_task(SimulationConfig(), seed=DEFAULT_TASK_SEED); "
        "regenerate it if the simulator changed on purpose"
    )
    size = sum(p.stat().st_size for p in EMBEDDED.iterdir())
    assert size < 6_000_000
