"""``score`` on the engine path with equivalence classes in the judgments, a ``truth.tsv`` and
non-uniform rounds: the in-memory output set, from SQL aggregates (receval.engine.score)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_engine_score import _same_output_sets, _score, make_bundle

from receval.engine.sampled import python_key


def with_classes(root: Path, *, classes: int = 2) -> Path:
    """``root``'s judgments with an ``equivalence_class`` on every correct annotation: the
    judged facts of a query fall into ``classes`` classes by a hash of the answer (so a class
    holds aliases several systems output, some output by one system twice)."""
    judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
    key = np.array([python_key(f"{a}") for a in judgments["answer"]])
    judgments["equivalence_class"] = np.where(
        judgments["label"] == "C", [f"e{k % classes}" for k in key], ""
    )
    judgments.to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


CASES = [
    ({}, ()),
    ({"teams": True, "duplicates": True, "layout": "one-file"}, ()),
    ({"pending": 3}, ("--allow-pending", "--target", "macro")),
    ({}, ("--cluster-queries", "--method", "basic", "--estimator", "simple")),
    ({"toml": '[official]\nunjudged = "wrong"\n'}, ("--rank-by", "precision")),
    (
        {"duplicates": True, "teams": True, "toml": '[official]\nunjudged = "wrong"\n'},
        ("--method", "BCa"),
    ),
    ({"units": "documents", "teams": True}, ("--rank-by", "recall")),
    ({"units": "prob", "pending": 2}, ("--allow-pending", "--target", "macro")),
]


@pytest.mark.parametrize(("options", "extra"), CASES)
def test_engine_score_with_classes_writes_the_in_memory_output_set(tmp_path, options, extra):
    root = with_classes(make_bundle(tmp_path / "b", **options))
    memory = _score(root, tmp_path / "memory", *extra, path="--in-memory")
    assert memory.exit_code == 0, memory.output
    engine = _score(root, tmp_path / "engine", *extra)
    assert engine.exit_code == 0, engine.output
    _same_output_sets(tmp_path / "memory", tmp_path / "engine")


@pytest.mark.parametrize("target", ["micro", "macro"])
@pytest.mark.parametrize("units", ["", "documents"])
def test_engine_sample_data_counts_each_class_once_as_in_memory(tmp_path, target, units):
    """Every array of the estimators' SampleData (sizes, draws, proposals summed over a class,
    targets, census, units, per-query cells, classes and unresolved outputs) equals the
    in-memory build_sample_data's on a bundle whose classes hold several facts."""
    import dataclasses

    from receval.bundle import Bundle
    from receval.engine.score import bundle_sample_data
    from receval.estimators.sample_data import build_sample_data
    from receval.task import load_task

    root = with_classes(make_bundle(tmp_path / "b", teams=True, units=units))
    want = build_sample_data(load_task(root), target)
    got = bundle_sample_data(Bundle(root), target=target)
    assert want.aliased_classes > 0 and want.unresolved_outputs > 0
    for f in dataclasses.fields(want):
        a, b = getattr(want, f.name), getattr(got, f.name)
        if f.name in ("overlap", "facts"):  # overlap: not on the engine path; ids differ
            continue
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(b, a, err_msg=f.name)
        else:
            assert b == a, f.name
