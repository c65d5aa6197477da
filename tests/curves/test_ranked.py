"""Ranked lists: ordering contract, Parquet row groups, lazily simulated labels."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from receval.curves.precision_function import local_precision, precision_function
from receval.curves.ranked import (
    ArrayRankedList,
    BumpShape,
    FrameRankedList,
    LogisticShape,
    ParquetRankedList,
    PiecewiseLinearShape,
    PowerShape,
    RankedList,
    ScaledSequenceShape,
    SimulatedRankedList,
    sliding_average,
)

# tests/curves/<this file>: the shared data folder is beside the repository (../shared/data).
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_frame_order_score_desc_ties_by_query_then_answer() -> None:
    frame = pd.DataFrame(
        {
            "query_id": ["q2", "q1", "q1", "q3", "q1", "q2"],
            "answer": ["b", "z", "a", "c", "m", "a"],
            "score": [0.5, 0.5, 0.5, np.nan, 0.9, np.nan],
            "label": [1, 0, 1, 1, 0, 0],
        }
    )
    ranked = FrameRankedList.from_frame(frame, label_column="label")
    got = list(zip(ranked.frame["query_id"], ranked.frame["answer"], strict=True))
    # 0.9 first; the three 0.5 by (query_id, answer); missing scores last in input order.
    assert got == [("q1", "m"), ("q1", "a"), ("q1", "z"), ("q2", "b"), ("q3", "c"), ("q2", "a")]
    assert list(ranked.frame["rank"]) == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(ranked.labels(np.array([2, 1, 6])), [1.0, 0.0, 0.0])
    assert list(ranked.items(np.array([4]))["answer"]) == ["b"]
    assert isinstance(ranked, RankedList)


def test_frame_without_scores_keeps_input_order() -> None:
    frame = pd.DataFrame({"query_id": ["b", "a", "c"], "answer": ["x", "y", "z"]})
    assert list(FrameRankedList.from_frame(frame).frame["query_id"]) == ["b", "a", "c"]
    frame["score"] = np.nan
    assert list(FrameRankedList.from_frame(frame).frame["query_id"]) == ["b", "a", "c"]
    with pytest.raises(LookupError):
        FrameRankedList.from_frame(frame).labels(np.array([1]))


def test_parquet_reads_only_needed_row_groups(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    n = 1_003
    frame = pd.DataFrame(
        {
            "query_id": [f"q{i % 17}" for i in range(n)],
            "answer": [f"a{i}" for i in range(n)],
            "score": np.sort(rng.random(n))[::-1],
            "label": (rng.random(n) < 0.5).astype(np.int8),
        }
    )
    path = tmp_path / "ranked.parquet"
    frame.to_parquet(path, row_group_size=64)
    ranked = ParquetRankedList(path)
    assert ranked.size == n and ranked.offsets.size == math.ceil(n / 64) + 1
    ranks = np.array([1_003, 1, 65, 64, 500, 500, 2])
    np.testing.assert_array_equal(ranked.labels(ranks), frame["label"].to_numpy()[ranks - 1])
    items = ranked.items(ranks)
    assert list(items["answer"]) == [f"a{r - 1}" for r in ranks]
    assert list(items["rank"]) == list(ranks)
    chunks = list(ranked.iter_labels(start=60, stop=200))
    assert chunks[0][0] == 60
    np.testing.assert_array_equal(np.concatenate([c for _, c in chunks]), frame["label"][59:200])
    np.testing.assert_allclose(
        ranked.true_precision(ranks), precision_function(frame["label"].to_numpy(), ranks)
    )


def test_sliding_average_is_centred_with_narrow_edges() -> None:
    values = np.arange(10, dtype=float)
    got = sliding_average(values, 4)
    expected = [
        np.mean(values[max(0, i - 2) : min(10, i + 2)]) for i in range(10)
    ]  # positions i-2 .. i+1
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize(
    "shape",
    [
        LogisticShape(0.9, 0.2, 500.0, 150.0),
        PowerShape(0.95, 0.1, 50.0, 0.6),
        PowerShape(0.95, 0.1, 50.0, 1.0),
        PiecewiseLinearShape(np.array([0.0, 100, 400, 1000]), np.array([1.0, 0.7, 0.7, 0.1])),
        BumpShape(LogisticShape(0.9, 0.2, 500.0, 150.0), 300.0, 420.0, 0.05),
        ScaledSequenceShape(np.array([0.9, 0.5, 0.25, 0.1]), scale=300),
    ],
)
def test_shape_cumulative_is_the_integral_of_a_density_in_unit_range(shape: object) -> None:
    x = np.arange(0.0, 1_201.0)
    cum = shape.cumulative(x)  # type: ignore[attr-defined]
    inc = np.diff(cum)
    assert cum[0] == pytest.approx(0.0, abs=1e-9)
    assert np.all(inc >= -1e-12) and np.all(inc <= 1 + 1e-12)
    if isinstance(shape, (LogisticShape, PowerShape)):
        density = {
            LogisticShape: lambda t: (
                shape.low
                + (shape.high - shape.low) / (1 + math.exp((t - shape.midpoint) / shape.width))
            ),
            PowerShape: lambda t: (
                shape.low + (shape.high - shape.low) * (1 + t / shape.scale) ** (-shape.exponent)
            ),
        }[type(shape)]
        for a in [0.0, 37.0, 640.0]:
            val, _ = integrate.quad(density, 0.0, a + 1.0)
            assert cum[int(a) + 1] == pytest.approx(val, rel=1e-9, abs=1e-9)


def test_simulated_labels_are_reproducible_and_lazy() -> None:
    shape = LogisticShape(0.9, 0.3, 2_000.0, 500.0)
    a = SimulatedRankedList(5_000, shape, seed=7)
    b = SimulatedRankedList(5_000, shape, seed=7)
    c = SimulatedRankedList(5_000, shape, seed=8)
    ranks = np.arange(1, 5_001)
    la = a.labels(ranks)
    np.testing.assert_array_equal(la, b.labels(ranks))
    assert np.any(la != c.labels(ranks))
    # A rank's label does not depend on which other ranks are asked with it.
    picks = np.array([4_999, 3, 1_234])
    np.testing.assert_array_equal(a.labels(picks), la[picks - 1])
    with pytest.raises(ValueError):
        a.labels(np.array([5_001]))


def test_bernoulli_labels_have_the_shape_probability() -> None:
    """Over a flat stretch of density 0.3 the positive count is Binomial(n, 0.3)."""
    shape = PiecewiseLinearShape(np.array([0.0]), np.array([0.3]))
    n = 200_000
    ranked = SimulatedRankedList(n, shape, seed=11)
    count = ranked.labels(np.arange(1, n + 1)).sum()
    lo, hi = stats.binom.ppf([1e-4, 1 - 1e-4], n, 0.3)
    assert lo <= count <= hi
    # Independence: the number of runs of equal labels matches its expectation.
    labels = ranked.labels(np.arange(1, n + 1))
    changes = np.count_nonzero(np.diff(labels))
    mean = 2 * (n - 1) * 0.3 * 0.7
    assert abs(changes - mean) <= 5 * math.sqrt(mean)


def test_balanced_arrangement_has_bounded_discrepancy() -> None:
    shape = LogisticShape(0.95, 0.35, 8_000.0, 3_000.0)
    n = 30_000
    ranked = SimulatedRankedList(n, shape, arrangement="balanced")
    labels = ranked.labels(np.arange(1, n + 1))
    cum = np.concatenate([[0.0], np.cumsum(labels)])
    expected = shape.cumulative(np.arange(0, n + 1, dtype=float))
    assert np.all(np.abs(cum - expected) < 1.0 + 1e-9)
    ranks = np.array([1, 10, 999, 29_999, 30_000])
    np.testing.assert_allclose(ranked.true_precision(ranks), cum[ranks] / ranks)


def test_true_precision_of_bernoulli_list_is_exact() -> None:
    shape = PowerShape(0.95, 0.2, 300.0, 0.8)
    ranked = SimulatedRankedList(40_000, shape, seed=3)
    labels = ranked.labels(np.arange(1, 40_001))
    ranks = np.array([40_000, 1, 17, 2_500, 39_999])
    np.testing.assert_allclose(
        ranked.true_precision(ranks, chunk_size=999), precision_function(labels, ranks)
    )
    np.testing.assert_allclose(
        ranked.true_local_precision(ranks, 100, chunk_size=999),
        local_precision(labels, 100, ranks),
    )
    ar = ArrayRankedList(labels)
    np.testing.assert_allclose(ar.true_precision(ranks), precision_function(labels, ranks))


def test_scaled_list_follows_adastrat_section_5() -> None:
    base = (np.random.default_rng(5).random(1_000) < np.linspace(0.9, 0.4, 1_000)).astype(float)
    ranked = SimulatedRankedList.scaled(base, scale=10, window=100, seed=1)
    assert ranked.size == 10_000
    q = sliding_average(base, 100)
    # Ranks 10i+1 .. 10i+10 share probability q(i).
    np.testing.assert_allclose(ranked.probabilities(np.arange(1, 10_001)), np.repeat(q, 10))
    np.testing.assert_allclose(
        ranked.expected_precision(np.array([10, 10_000])),
        [q[0], q.mean()],
    )


def test_two_billion_items_in_constant_memory() -> None:
    tracemalloc.start()
    ranked = SimulatedRankedList(2_000_000_000, PowerShape(0.95, 0.3, 1e4, 0.5), seed=1)
    ranks = np.array([1, 1_000_000_000, 1_999_999_999, 2_000_000_000])
    labels = ranked.labels(ranks)
    expected = ranked.expected_precision(ranks)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert set(np.unique(labels)) <= {0.0, 1.0}
    assert np.all((expected > 0.3) & (expected <= 0.95))
    assert peak < 1_000_000  # bytes


def ppdb_labels() -> np.ndarray:
    path = DATA / "ppdb2-human" / "ppdb-sample.tsv"
    if not path.exists():
        pytest.skip("shared PPDB data not available")
    frame = pd.read_csv(path, sep="\t", header=None, quoting=3)
    return (frame[0] >= 3).to_numpy(np.float64)


def test_scaled_ppdb_list_from_real_labels() -> None:
    labels = ppdb_labels()
    ranked = SimulatedRankedList.scaled(labels, scale=10, window=100, seed=0)
    assert ranked.size == 10 * labels.size
    # The scaled list keeps the base precision: expected p(N) is the mean of the centred
    # sliding average, which differs from the base mean only through the edge windows.
    p_n = ranked.expected_precision(np.array([ranked.size]))[0]
    assert abs(p_n - labels.mean()) < 100 / labels.size
    realised = ranked.true_precision(np.array([ranked.size]))[0]
    sd = math.sqrt(p_n * (1 - p_n) / ranked.size)
    assert abs(realised - p_n) < 5 * sd
