"""``sample`` on the engine path: out of core by default on large Parquet bundles, and every
design drawn in SQL with the probabilities the in-memory estimators expect."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_bundle import write_bundle

from receval.cli import cli


def _sample(root, *extra):
    args = ["sample", str(root), "--per-system", "5", "--seed", "7", *extra]
    return CliRunner().invoke(cli, args)


def _drawn(root) -> list[str]:
    return list(pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)["answer"])


def _engine_rounds(monkeypatch) -> list[int]:
    """A list that grows by one for every round drawn by the engine path's ``sample_round``."""
    import receval.engine.sampled as sampled

    calls: list[int] = []
    engine_round = sampled.sample_round

    def counted(*args, **kwargs):
        calls.append(1)
        return engine_round(*args, **kwargs)

    monkeypatch.setattr(sampled, "sample_round", counted)
    return calls


@pytest.mark.parametrize("threshold", [10, 10**9])
def test_sample_takes_the_engine_path_from_engine_path_rows(tmp_path, monkeypatch, threshold):
    """Without --engine, a Parquet bundle of ≥ ENGINE_PATH_ROWS rows draws in the engine, as
    --engine duckdb does; a smaller one, or --in-memory, draws in memory: the same (hashed)
    draws either way."""
    import receval.engine.score as score

    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", threshold)
    calls = _engine_rounds(monkeypatch)
    roots = {k: write_bundle(tmp_path / k, "per-system") for k in ("auto", "engine", "memory")}
    assert _sample(roots["auto"]).exit_code == 0
    assert len(calls) == (threshold == 10)
    assert _sample(roots["engine"], "--engine", "duckdb").exit_code == 0
    assert _sample(roots["memory"], "--in-memory").exit_code == 0
    assert len(calls) == 1 + (threshold == 10)
    assert _drawn(roots["auto"]) == _drawn(roots["engine"]) == _drawn(roots["memory"])


def test_engine_with_in_memory_is_a_usage_error(tmp_path):
    root = write_bundle(tmp_path / "b", "per-system")
    result = _sample(root, "--engine", "duckdb", "--in-memory")
    assert result.exit_code == 2 and "not with --in-memory" in result.output
    result = _sample(root, "--out-of-core")
    assert result.exit_code == 0, result.output


def _entity_bundle(root, layout: str = "per-system"):
    """A bundle whose queries carry ``entity`` and ``slot`` (two entities, two slots) and
    whose runs repeat some rows (input rows ≠ distinct facts: the design counts both)."""
    from test_bundle import _runs

    runs = _runs(4)
    runs = pd.concat([runs, runs.iloc[::7]], ignore_index=True)  # a few rows twice
    runs.loc[runs.index[::5], "answer"] = runs["answer"].iloc[::5].str.upper()  # same facts
    write_bundle(root, layout, runs)
    pd.DataFrame(
        {
            "query_id": [f"q{q}" for q in range(5)],
            "entity": ["e0", "e0", "e1", "e1", "e1"],
            "slot": ["s0", "s1", "s0", "s1", "s1"],
        }
    ).to_csv(root / "queries.tsv", sep="\t", index=False)
    return root


def test_entity_relation_draws_have_the_design_probabilities(tmp_path):
    """An engine-drawn entity-relation round: every recorded prob is the in-memory design's
    s_j(x) (infer_designs accepts it as entity-relation), and with many draws each fact's share
    of its system's draws is s_j(x) within 4.5 binomial SE (every fact: ~200 comparisons)."""
    import numpy as np

    from receval.bundle import Bundle
    from receval.design import sampling_probabilities
    from receval.engine.sampled import sample_round
    from receval.task import load_task

    root = _entity_bundle(tmp_path / "b")
    n = 20_000
    drawn = sample_round(Bundle(root), n, seed=5, distribution="entity-relation")
    Bundle(root).record_round(drawn)
    task = load_task(root)
    assert {s.design for s in task.samplers} == {"entity-relation"}
    outputs = task.outputs
    expected = sampling_probabilities(outputs, task.queries, "entity-relation").to_numpy()
    uniform = sampling_probabilities(outputs, task.queries, "uniform").to_numpy()
    assert not np.allclose(expected, uniform)  # the design is not uniform here
    samples = task.samples
    for system, rows in outputs.groupby("system"):
        got = samples[samples["system"] == system]["fact"].value_counts()
        freq = got.reindex(rows["fact"]).fillna(0).to_numpy() / n
        p = expected[rows.index.to_numpy()]
        assert np.all(np.abs(freq - p) <= 4.5 * np.sqrt(p * (1 - p) / n))
        recorded = samples[samples["system"] == system].set_index("fact")["prob"]
        want = pd.Series(p, index=rows["fact"].to_numpy())
        np.testing.assert_allclose(recorded, want.reindex(recorded.index), rtol=1e-9)


def test_entity_relation_round_is_the_same_on_every_layout(tmp_path):
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    rounds = [
        sample_round(
            Bundle(_entity_bundle(tmp_path / layout, layout)),
            7,
            seed=2,
            distribution="entity-relation",
        )
        for layout in ("tsv", "parquet", "dataset", "per-system")
    ]
    for other in rounds[1:]:
        pd.testing.assert_frame_equal(other.samples, rounds[0].samples)
        pd.testing.assert_frame_equal(other.to_annotate, rounds[0].to_annotate)


def test_cli_engine_round_with_exhaustive_units(tmp_path):
    """``sample --engine duckdb --exhaustive-units M --units-from F``: uniform candidates are a
    simple random sample without the units annotated before; weighted ones pps-wr draws, with
    draws and design in to_annotate.tsv; the bundle then loads and scores in memory."""
    root = _entity_bundle(tmp_path / "b")
    (tmp_path / "units.tsv").write_text("unit\n" + "".join(f"d{i}\n" for i in range(30)))
    pd.DataFrame({"unit": ["d1", "d2"]}).to_csv(
        root / "exhaustive_units.tsv", sep="\t", index=False
    )
    args = ["--distribution", "entity-relation", "--engine", "duckdb"]
    args += ["--exhaustive-units", "5", "--units-from", str(tmp_path / "units.tsv")]
    result = _sample(root, *args)
    assert result.exit_code == 0, result.output
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    units = todo[todo["kind"] == "unit"]["unit"]
    assert len(units) == 5 and not set(units) & {"d1", "d2"}
    assert len(todo[todo["kind"] == "fact"]) > 0
    weighted = pd.DataFrame({"unit": [f"d{i}" for i in range(30)], "prob": range(1, 31)})
    weighted.to_csv(tmp_path / "weighted.tsv", sep="\t", index=False)
    again = _sample(root, "--engine", "duckdb", "--exhaustive-units", "40", "--units-from",
                    str(tmp_path / "weighted.tsv"))  # fmt: skip
    assert again.exit_code == 0, again.output
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", keep_default_na=False)
    drawn = todo[todo["kind"] == "unit"]
    assert set(drawn["design"]) == {"pps-wr"} and drawn["draws"].astype(int).sum() == 40


def _judged_bundle(root, layout: str = "per-system", graded: bool = False):
    """A bundle with a judge table over most facts (continuous scores: equal-count bins; or 5
    grades) and a few labels (the Neyman weights then come from them)."""
    import numpy as np
    from test_bundle import _runs

    runs = _runs(6)
    write_bundle(root, layout, runs)
    facts = runs[["query_id", "answer"]].drop_duplicates().reset_index(drop=True)
    rng = np.random.default_rng(3)
    score = rng.random(len(facts))
    score = np.round(score * 4) / 4 if graded else np.round(score, 3)
    judge = facts.assign(judge_score=score).iloc[: int(0.8 * len(facts))]
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    labelled = facts.iloc[::3].assign(label=(rng.random(len(facts[::3])) < 0.6).astype(int))
    labelled.to_csv(root / "judgments.tsv", sep="\t", index=False)
    return root


@pytest.mark.parametrize("graded", [False, True])
def test_by_judge_draws_have_the_design_probabilities(tmp_path, graded):
    """An engine-drawn --by-judge round: its judge-strata design is recognised by the loader
    (every recorded prob is the in-memory s_j(x) at the loader's levels) and with 20k draws per
    system each fact's share of the draws is s_j(x) within 4.5 binomial SE."""
    import numpy as np

    from receval.bundle import Bundle
    from receval.design import JUDGE_STRATA, sampling_probabilities
    from receval.engine.sampled import sample_round
    from receval.task import load_task

    root = _judged_bundle(tmp_path / "b", graded=graded)
    n = 20_000
    drawn = sample_round(Bundle(root), n, seed=11, by_judge=True)
    Bundle(root).record_round(drawn)
    task = load_task(root)
    designs = {s.design for s in task.samplers}
    assert len(designs) == 1 and next(iter(designs)).startswith(JUDGE_STRATA + ":")
    design = next(iter(designs))
    outputs = task.outputs
    expected = sampling_probabilities(outputs, task.queries, design).to_numpy()
    uniform = sampling_probabilities(outputs, task.queries, "uniform").to_numpy()
    assert not np.allclose(expected, uniform)
    samples = task.samples
    for system, rows in outputs.groupby("system"):
        mine = samples[samples["system"] == system]
        freq = mine["fact"].value_counts().reindex(rows["fact"]).fillna(0).to_numpy() / n
        p = expected[rows.index.to_numpy()]
        assert np.all(np.abs(freq - p) <= 4.5 * np.sqrt(p * (1 - p) / n))
        want = pd.Series(p, index=rows["fact"].to_numpy()).reindex(mine["fact"])
        np.testing.assert_allclose(mine["prob"].to_numpy(), want.to_numpy(), rtol=1e-9)


def test_by_judge_round_is_the_same_on_every_layout(tmp_path):
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    rounds = [
        sample_round(Bundle(_judged_bundle(tmp_path / layout, layout)), 9, seed=4, by_judge=True)
        for layout in ("tsv", "parquet", "dataset", "per-system")
    ]
    for other in rounds[1:]:
        pd.testing.assert_frame_equal(other.samples, rounds[0].samples)
        pd.testing.assert_frame_equal(other.to_annotate, rounds[0].to_annotate)


def test_cli_by_judge_without_judge_table_is_one_line(tmp_path):
    root = write_bundle(tmp_path / "b", "per-system")
    result = _sample(root, "--engine", "duckdb", "--by-judge")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "judge.tsv" in lines[0]


@pytest.mark.slow
@needs_spark
def test_spark_draws_the_designs_as_duckdb(tmp_path, monkeypatch):
    """entity-relation and --by-judge rounds (with exhaustive units): Spark draws the same
    facts with the same probabilities as DuckDB, from the same SQL texts."""
    import os

    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    units = pd.DataFrame({"unit": [f"d{i}" for i in range(9)]})
    cases = (
        (_entity_bundle(tmp_path / "er"), {"distribution": "entity-relation"}),
        (_judged_bundle(tmp_path / "j"), {"by_judge": True}),
    )
    for root, design in cases:
        bundle = Bundle(root)
        options = {**design, "units": units, "exhaustive_units": 3}
        duck = sample_round(bundle, 8, seed=3, **options)
        spark = sample_round(bundle, 8, seed=3, engine="spark", **options)
        pd.testing.assert_frame_equal(spark.samples, duck.samples)
        pd.testing.assert_frame_equal(spark.to_annotate, duck.to_annotate)


def test_api_sample_is_out_of_core_by_default_on_large_parquet_bundles(tmp_path, monkeypatch):
    """``receval.sample`` (and ``sample_round``) on a bundle path: the engine's round from
    ENGINE_PATH_ROWS rows on, or with out_of_core=True; the in-memory one with False."""
    import receval
    import receval.engine.score as score
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    root = write_bundle(tmp_path / "b", "per-system")
    engine = sample_round(Bundle(root), 4, seed=2).samples
    calls = _engine_rounds(monkeypatch)
    memory = receval.sample(root, 4, seed=2, out_of_core=False).samples
    pd.testing.assert_frame_equal(receval.sample(root, 4, seed=2).samples, memory)
    pd.testing.assert_frame_equal(memory, engine)  # the same hashed draws on both paths
    assert not calls
    pd.testing.assert_frame_equal(receval.sample(root, 4, seed=2, out_of_core=True).samples, engine)
    assert len(calls) == 1
    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", 10)
    pd.testing.assert_frame_equal(receval.sample(root, 4, seed=2).samples, engine)
    assert len(calls) == 2
    with pytest.raises(ValueError, match="unknown system"):
        receval.sample(root, 4, seed=2, systems=["nope"])
    with pytest.raises(ValueError, match="loaded task"):
        receval.sample(receval.load_task(root), 4, seed=2, out_of_core=True)


def test_adaptive_on_a_large_bundle_is_planned_and_drawn_in_the_engine(tmp_path, monkeypatch):
    """--adaptive on a bundle past ENGINE_PATH_ROWS is planned from the engine's aggregates
    and drawn by the engine (the same round as --out-of-core); --by-judge is planned there too:
    without a judge table it is the in-memory path's one error line."""
    import receval.engine.score as score

    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", 10)
    roots = {k: write_bundle(tmp_path / k, "per-system") for k in ("auto", "explicit")}
    args = ["--adaptive", "--target-width", "0.3", "--seed", "1"]
    result = CliRunner().invoke(cli, ["sample", str(roots["auto"]), *args])
    assert result.exit_code == 0, result.output
    assert "drawn in memory only" not in result.output
    explicit = CliRunner().invoke(cli, ["sample", str(roots["explicit"]), *args, "--out-of-core"])
    assert explicit.exit_code == 0, explicit.output
    assert explicit.output == result.output.replace("/auto/", "/explicit/")
    assert _drawn(roots["auto"]) == _drawn(roots["explicit"])
    judged = ["sample", str(roots["auto"]), *args, "--by-judge"]
    refused = CliRunner().invoke(cli, [*judged, "--out-of-core"])
    memory = CliRunner().invoke(cli, [*judged, "--in-memory"])
    assert refused.exit_code == memory.exit_code == 2 and "judge.tsv" in refused.output
    assert refused.output == memory.output


@pytest.mark.parametrize("design", ["entity-relation", "by-judge"])
def test_an_engine_round_scores_with_the_in_memory_estimators(tmp_path, design):
    """An engine-drawn round, its facts labelled by a rule, scored by ``receval.score`` in
    memory (joint estimator, bootstrap): each system's precision estimate lies within two
    half-widths (about 4 SE) of the rule's true precision over the system's facts."""
    import numpy as np

    import receval
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    def rule(answers):
        return np.where(pd.Series(answers).str[-1].isin(list("0123")), "C", "W")

    make = _entity_bundle if design == "entity-relation" else _judged_bundle
    root = make(tmp_path / "b")
    (root / "judgments.tsv").unlink(missing_ok=True)
    options = {"distribution": "entity-relation"} if design == "entity-relation" else {}
    drawn = sample_round(Bundle(root), 60, seed=5, by_judge=design == "by-judge", **options)
    Bundle(root).record_round(drawn)
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str)
    todo["label"] = rule(todo["answer"].str.lower())
    todo[["query_id", "answer", "label"]].to_csv(root / "judgments.tsv", sep="\t", index=False)
    outputs = receval.load_task(root).outputs
    truth = outputs.assign(c=rule(outputs["answer"]) == "C").groupby("system")["c"].mean()
    board = receval.score(root).leaderboard.set_index("system")
    half = (board["precision_hi"] - board["precision_lo"]) / 2
    assert (half > 0).all()
    assert ((board["precision"] - truth.reindex(board.index)).abs() <= 2 * half).all()
