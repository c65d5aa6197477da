"""The in-memory ``sample`` draws through the engine's hashed function of (seed, round, system,
draw) (:func:`receval.design.hashed_precision_samples`): ``--in-memory`` and ``--out-of-core``
write the same ``samples.tsv`` and ``to_annotate.tsv`` bytes for the same seed, on several
bundles and every design the engine draws (Spark in a slow test); the design only the
in-memory path draws is i.i.d. from its recorded ``prob``."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_bundle import write_bundle
from test_draws import messy_runs
from test_sample_adaptive import _labelled_bundle
from test_sample_designs import _entity_bundle, _judged_bundle

from receval.cli import cli

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ("samples.tsv", "to_annotate.tsv")


def _messy_bundle(root: Path, layout: str = "parquet") -> Path:
    runs = messy_runs(1)
    runs = runs[~runs["answer"].str.contains("\t")]  # samples.tsv cannot hold a tab
    write_bundle(root, layout, runs)
    queries = sorted(set(runs["query_id"]))
    pd.DataFrame({"query_id": queries}).to_csv(root / "queries.tsv", sep="\t", index=False)
    return root


def _unicode_spaces_bundle(root: Path, layout: str = "tsv") -> Path:
    """Answers wrapped in whitespace other than spaces (an em space, a no-break space): the
    spelling keeps them on every path (the engine trims spaces only, text runs included)."""
    from test_bundle import _runs

    runs = _runs(2)
    runs["answer"] = runs["answer"].str.replace(" Doc", "\u2003Doc", regex=False) + "\u00a0"
    return write_bundle(root, layout, runs)


def _units(folder: Path, weighted: bool) -> Path:
    path = folder / ("weighted.tsv" if weighted else "units.tsv")
    frame = pd.DataFrame({"unit": [f"d{i}" for i in range(30)]})
    if weighted:
        frame["prob"] = np.arange(1, 31)
    frame.to_csv(path, sep="\t", index=False)
    return path


def _both_paths(source: Path, tmp: Path, rounds: list[list[str]]) -> dict[str, dict[str, bytes]]:
    """Copies of ``source`` drawn ``--in-memory`` and ``--out-of-core`` with each round's
    options in turn; the bytes each copy ends with."""
    out = {}
    for path in ("--in-memory", "--out-of-core"):
        root = tmp / path.strip("-")
        shutil.copytree(source, root)
        for options in rounds:
            result = CliRunner().invoke(cli, ["sample", str(root), *options, path])
            assert result.exit_code == 0, (path, options, result.output)
            assert "in memory" not in result.output, result.output
        out[path] = {name: (root / name).read_bytes() for name in WRITTEN}
    return out


def _assert_same(drawn: dict[str, dict[str, bytes]]) -> None:
    memory, engine = drawn["--in-memory"], drawn["--out-of-core"]
    for name in WRITTEN:
        assert memory[name] == engine[name], name
    assert memory["samples.tsv"].count(b"\n") > 1


PER_SYSTEM = ["--per-system", "6", "--seed", "7"]
AGAIN = ["--per-system", "4", "--seed", "7", "--system", "A", "--system", "C"]


@pytest.mark.parametrize(
    ("make", "options"),
    [
        pytest.param(lambda r: write_bundle(r, "per-system"), [], id="uniform"),
        pytest.param(lambda r: write_bundle(r, "tsv"), [], id="uniform-tsv"),
        pytest.param(_messy_bundle, [], id="uniform-messy-answers"),
        pytest.param(_unicode_spaces_bundle, [], id="uniform-unicode-spaces-tsv"),
        pytest.param(_entity_bundle, ["--distribution", "entity-relation"], id="entity-relation"),
        pytest.param(_judged_bundle, ["--by-judge"], id="by-judge"),
        pytest.param(lambda r: _judged_bundle(r, graded=True), ["--by-judge"], id="by-judge-5"),
    ],
)
def test_in_memory_and_out_of_core_write_the_same_rounds(tmp_path, make, options):
    """Two rounds (the second of two systems, so to_annotate lists both rounds' facts):
    the same bytes on both paths."""
    source = make(tmp_path / "source")
    drawn = _both_paths(source, tmp_path, [PER_SYSTEM + options, AGAIN + options])
    _assert_same(drawn)


@pytest.mark.parametrize("weighted", [False, True])
def test_exhaustive_units_are_the_same_on_both_paths(tmp_path, weighted):
    """Uniform candidates (a simple random sample without the units annotated before) and
    weighted ones (pps-wr draws): the same units, the same rows."""
    source = _entity_bundle(tmp_path / "source")
    pd.DataFrame({"unit": ["d1", "d2"]}).to_csv(
        source / "exhaustive_units.tsv", sep="\t", index=False
    )
    units = ["--exhaustive-units", "12", "--units-from", str(_units(tmp_path, weighted))]
    drawn = _both_paths(source, tmp_path, [PER_SYSTEM + units])
    _assert_same(drawn)
    assert drawn["--in-memory"]["to_annotate.tsv"].count(b"\tunit") or weighted


def test_adaptive_and_until_decided_are_the_same_on_both_paths(tmp_path):
    """An --adaptive round planned and drawn, then (after labelling by a rule) an
    --until-decided round with its floor draws' mixture_prob: the same bytes."""
    from test_sample_adaptive import _label

    source = _labelled_bundle(tmp_path / "source", sizes={"A": 20, "B": 20, "C": 20})
    adaptive = ["--adaptive", "--target-width", "0.2", "--system", "C", "--seed", "4"]
    drawn = _both_paths(source, tmp_path / "a", [adaptive])
    _assert_same(drawn)
    loop = ["--until-decided", "--batch", "20", "--rank-by", "precision", "--seed", "3",
            "--intervals", "anytime-asymptotic"]  # fmt: skip
    _label(tmp_path / "a" / "in-memory")
    drawn = _both_paths(tmp_path / "a" / "in-memory", tmp_path / "u", [loop])
    _assert_same(drawn)
    assert b"mixture_prob" in drawn["--in-memory"]["samples.tsv"]


def test_kbp_sim_draws_the_same_round_on_both_paths(tmp_path):
    """data/kbp-sim (text runs, earlier rounds, labels, exhaustive units): a new uniform round
    and its to_annotate.tsv, the same bytes in memory and in DuckDB."""
    source = tmp_path / "kbp-sim"
    shutil.copytree(ROOT / "data" / "kbp-sim", source)
    drawn = _both_paths(source, tmp_path, [["--per-system", "3", "--seed", "11"]])
    _assert_same(drawn)


def test_the_same_call_draws_the_same_round_and_another_seed_another(tmp_path):
    import receval

    root = _messy_bundle(tmp_path / "b")
    one = receval.sample(root, 9, seed=1, out_of_core=False).samples
    pd.testing.assert_frame_equal(one, receval.sample(root, 9, seed=1, out_of_core=False).samples)
    assert not one.equals(receval.sample(root, 9, seed=2, out_of_core=False).samples)


def test_judge_uncertainty_draws_follow_their_recorded_probabilities(tmp_path):
    """``judge-uncertainty`` (drawn in memory only, by the hashed mixture of
    :func:`receval.design._mixture_rows`): with 20k draws per system each fact's share of its
    system's draws is s_j(x) within 4.5 binomial SE, the recorded prob is s_j(x), and the
    loader recognises the design."""
    import receval
    from receval.bundle import Bundle
    from receval.design import sampling_probabilities

    root = _judged_bundle(tmp_path / "b")
    n = 20_000
    drawn = receval.sample(root, n, seed=3, distribution="judge-uncertainty", out_of_core=False)
    Bundle(root).record_round(drawn)
    task = receval.load_task(root)
    assert {s.design for s in task.samplers} == {"judge-uncertainty"}
    expected = sampling_probabilities(task.outputs, task.queries, "judge-uncertainty").to_numpy()
    for system, rows in task.outputs.groupby("system", observed=True):
        mine = task.samples[task.samples["system"] == system]
        freq = mine["fact"].value_counts().reindex(rows["fact"]).fillna(0).to_numpy() / n
        p = expected[rows.index.to_numpy()]
        assert np.all(np.abs(freq - p) <= 4.5 * np.sqrt(p * (1 - p) / n))
        want = pd.Series(p, index=rows["fact"].to_numpy()).reindex(mine["fact"])
        np.testing.assert_allclose(mine["prob"].to_numpy(), want.to_numpy(), rtol=1e-12)


@pytest.mark.slow
@needs_spark
def test_spark_draws_the_in_memory_rounds(tmp_path, monkeypatch):
    """Spark (local) draws the in-memory rounds: uniform, entity-relation and --by-judge."""
    import os

    import receval
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    cases = (
        (_messy_bundle(tmp_path / "u"), {}),
        (_entity_bundle(tmp_path / "er"), {"distribution": "entity-relation"}),
        (_judged_bundle(tmp_path / "j"), {"by_judge": True}),
    )
    for root, design in cases:
        spark = sample_round(Bundle(root), 8, seed=3, engine="spark", **design)
        task = receval.load_task(root)
        distribution = design.get("distribution", "uniform")
        if design.get("by_judge"):
            from receval.estimators.judge_calibration import judge_strata_design

            distribution = judge_strata_design(task)
        memory = receval.sample(task, 8, seed=3, distribution=distribution)
        pd.testing.assert_frame_equal(memory.samples, spark.samples)
        pd.testing.assert_frame_equal(memory.to_annotate, spark.to_annotate)
