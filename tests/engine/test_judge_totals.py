"""The judge's known totals of ``--estimator ppi`` in SQL (receval.engine.judge_totals): the
in-memory :func:`receval.estimators.ppi.judge_totals`, from the runs' aggregates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_engine_score import make_bundle

from receval.bundle import Bundle
from receval.engine.sampled import python_key


def with_judge(root: Path, share: float = 0.8) -> Path:
    """A judge scoring about ``share`` of the pool facts (the others imputed), spelled as the
    runs spell them or not, plus a fact no system output."""
    runs = pd.concat(
        [pd.read_parquet(p) for p in sorted((root / "runs").glob("*.parquet"))]
        if (root / "runs").is_dir()
        else [pd.read_parquet(root / "runs.parquet")]
    )
    facts = runs[["query_id", "answer"]].drop_duplicates()
    pairs = zip(facts["query_id"], facts["answer"], strict=True)
    key = np.array([python_key(f"{q}|{a}") for q, a in pairs])
    kept = facts[(key % 100) < share * 100].copy()
    kept["answer"] = np.where(key[(key % 100) < share * 100] % 2, kept["answer"].str.upper(),
                              kept["answer"])  # fmt: skip
    kept["judge_score"] = ((key[(key % 100) < share * 100] % 997) / 996.0).round(4)
    extra = pd.DataFrame({"query_id": ["q1"], "answer": ["nobody's"], "judge_score": [0.3]})
    pd.concat([kept, extra]).to_csv(root / "judge.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize(
    ("options", "target"),
    [
        ({}, "micro"),
        ({"teams": True, "layout": "one-file", "topup": True}, "macro"),
        ({"units": "uniform", "pending": 3}, "micro"),
    ],
)
def test_engine_judge_totals_equal_the_in_memory_ones(tmp_path, options, target):
    from receval.engine.judge_totals import bundle_judge_totals
    from receval.estimators.ppi import judge_totals
    from receval.estimators.sample_data import build_sample_data

    root = with_judge(make_bundle(tmp_path / "b", **options))
    task = Bundle(root).load()
    want = judge_totals(task, build_sample_data(task, target), target, "size", False)
    got = bundle_judge_totals(Bundle(root), target=target)
    for name in ("score_drawn", "scored_drawn", "expected_score", "expected_mass",
                 "scored_share", "judge_precision"):  # fmt: skip
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=name)
    assert not want.scored_drawn.all() and want.scored_drawn.any()


def test_several_judges_are_refused(tmp_path):
    from receval.engine.judge_totals import bundle_judge_totals

    root = with_judge(make_bundle(tmp_path / "b", rounds=1))
    judge = pd.read_csv(root / "judge.tsv", sep="\t", dtype=str)
    pd.concat([judge.assign(judge="a"), judge.assign(judge="b")]).to_csv(
        root / "judge.tsv", sep="\t", index=False
    )
    with pytest.raises(ValueError, match="several judges"):
        bundle_judge_totals(Bundle(root))
