"""The shortcuts of the TREC import and the direct official score give what the general code
gives: a run ranked without the 3-key sort (:func:`receval.formats.trec_order.ranked_order`), facts
numbered from Arrow codes (:func:`receval.engine.sampled_data.number_facts`), system and query
codes from runs of equal values and answers encoded query by query
(:mod:`receval.official.direct`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import receval
from receval.formats import trec_order
from receval.official import direct
from receval.scoring import ScoreOptions


def _sorted_order(run: pa.Table) -> np.ndarray:
    keys = [("qid", "ascending"), ("score", "descending"), ("docno", "descending")]
    return pc.sort_indices(run, sort_keys=keys).to_numpy()


def _fast_order(run: pa.Table) -> np.ndarray | None:
    found = trec_order.ranked_order(run)
    if found is None:
        return None
    order, _ = found
    return np.arange(run.num_rows) if order is trec_order.IN_ORDER else order


def _run(qid, score, docno) -> pa.Table:
    return pa.table(
        {
            "qid": pa.array(qid, pa.string()),
            "docno": pa.array(docno, pa.string()),
            "score": pa.array(score, pa.float64()),
        }
    )


@pytest.mark.parametrize(
    "qid, score, docno, taken",
    [
        (["2", "2", "10", "10"], [3.0, 1.0, 5.0, 5.0], ["a", "b", "z", "y"], True),
        (["2", "2", "10", "10"], [3.0, 1.0, 5.0, 5.0], ["a", "b", "y", "z"], True),  # tie
        (["2", "10", "2"], [3.0, 1.0, 5.0], ["a", "b", "c"], False),  # a qid in two blocks
        (["1", "1"], [1.0, 2.0], ["a", "b"], False),  # increasing score
        (["1"], [1.0], ["a"], True),
        (["1", "1"], [0.0, -0.0], ["a", "b"], True),  # -0.0 ties 0.0, as in the sort
        (["b", "a", "a"], [1.0, 2.0, 2.0], ["x", "é", "e"], True),  # code-point order
    ],
)
def test_ranked_order_is_the_sorts(qid, score, docno, taken):
    run = _run(qid, score, docno)
    fast = _fast_order(run)
    assert (fast is not None) == taken
    if fast is not None:
        assert fast.tolist() == _sorted_order(run).tolist()


def test_ranked_order_is_the_sorts_on_random_runs():
    """Runs in blocks of one qid by decreasing score (ties in any docno order), and shuffled
    ones: the shortcut gives the sort's order or declines."""
    rng = np.random.default_rng(7)
    taken = 0
    for k in range(400):
        n = int(rng.integers(1, 40))
        qid = rng.integers(0, 12, n).astype(str)
        score = rng.integers(0, 4, n).astype(float)
        docno = np.array([f"d{i}" for i in rng.permutation(n)])
        if k % 3:  # blocks of one qid, decreasing score, ties in random order
            order = np.lexsort((rng.random(n), -score, qid))
            qid, score, docno = qid[order], score[order], docno[order]
        run = _run(qid, score, docno)
        fast = _fast_order(run)
        if fast is not None:
            taken += 1
            assert fast.tolist() == _sorted_order(run).tolist()
    assert taken > 200


def test_number_facts_is_pandas_drop_sort_and_lookup():
    from receval.engine.sampled_data import _number_facts_pandas, number_facts

    def frame(q, a):
        return pd.DataFrame(
            {"query_id": pd.Series(q, dtype=str), "answer": pd.Series(a, dtype=str)}
        )

    one = frame(["b", "a", "a", "é", "Z", "b"], ["x", "ü", "a", "a", "x", "x"])
    empty = frame([], [])
    rng = np.random.default_rng(3)
    big = frame(rng.integers(0, 30, 5000).astype(str), rng.integers(0, 200, 5000).astype(str))
    for frames in ([one, empty, one], [empty], [empty, one], [big, one]):
        facts, numbers = number_facts(frames)
        want, want_numbers = _number_facts_pandas(frames)
        pd.testing.assert_frame_equal(facts, want)
        assert [n.tolist() for n in numbers] == [list(map(int, n)) for n in want_numbers]


def test_encoded_runs_are_dictionary_encodes():
    rng = np.random.default_rng(5)
    values = np.repeat(rng.choice(["s1", "s0", "s2"], 50), rng.integers(1, 9, 50))
    column = pa.chunked_array(
        [pa.array(values[:100]), pa.array([], pa.string()), pa.array(values[100:])]
    )
    got = direct._encoded_runs(column)
    want = direct._encoded(column)
    assert got[0].to_pylist() == want[0].to_pylist()
    assert got[1].tolist() == want[1].tolist()


def test_grouped_pairs_code_each_query_answer_pair_once(monkeypatch):
    monkeypatch.setattr(direct, "GROUPED_BLOCKS_PER_ROW", 1.0)  # short blocks taken too
    rng = np.random.default_rng(6)
    blocks = [(q, rng.choice(40, size=int(rng.integers(1, 20)), replace=False)) for q in
              rng.integers(0, 5, 60)]  # fmt: skip
    query = np.concatenate([np.full(len(a), q) for q, a in blocks]).astype(np.int32)
    answer = pa.chunked_array([pa.array([f"D{x}" for x in a]) for _, a in blocks])
    starts = np.cumsum([0] + [len(a) for _, a in blocks[:-1]])
    codes, dictionaries, offsets = direct._grouped_pairs(answer, query, starts, 7)
    pairs = list(zip(query.tolist(), answer.to_pylist(), strict=True))
    assert offsets[-1] == len(set(pairs))
    seen: dict = {}
    for pair, code in zip(pairs, codes.tolist(), strict=True):
        assert seen.setdefault(pair, code) == code
        q = pair[0]
        assert offsets[q] <= code < offsets[q + 1]
        assert dictionaries[q][code - offsets[q]].as_py() == pair[1]


@pytest.mark.parametrize("seed", [0, 1])
def test_grouped_answers_give_the_in_memory_output_set(tmp_path, seed, monkeypatch):
    """Answers encoded query by query (forced on the small test bundle) write the same files
    as the in-memory path."""
    from test_official_direct import FILES, _bundle

    monkeypatch.setattr(direct, "GROUPED_BLOCKS_PER_ROW", 1.0)
    calls = []
    grouped = direct._grouped_pairs
    monkeypatch.setattr(direct, "_grouped_pairs", lambda *a: calls.append(1) or grouped(*a))
    root = _bundle(tmp_path, seed)
    assert direct.official_view(root, ScoreOptions(estimator="official"), "duckdb", None)
    assert calls
    out = {}
    for name, out_of_core in (("direct", None), ("loaded", False)):
        result = receval.score(root, estimator="official", out_of_core=out_of_core)
        result.write(tmp_path / name, report=False)
        out[name] = {f: (tmp_path / name / f).read_bytes() for f in FILES}
    assert out["direct"] == out["loaded"]
