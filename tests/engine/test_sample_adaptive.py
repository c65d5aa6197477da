"""``sample --adaptive`` and ``sample --until-decided`` on the engine path: the planner and the
looks fed from SQL aggregates, the rounds drawn by the engine's hashed draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import needs_spark
from test_bundle import write_bundle

from receval.cli import cli

LAYOUTS = ("tsv", "parquet", "dataset", "per-system")


def _rule(answers) -> np.ndarray:
    """The known truth: an answer is correct when its last character is 0–4."""
    return np.where(pd.Series(list(answers)).str[-1].isin(list("01234")), "C", "W")


def _label(root) -> None:
    """Label every fact of to_annotate.tsv by :func:`_rule` (judgments.tsv kept)."""
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    todo = todo[todo["kind"] == "fact"]
    new = pd.DataFrame(
        {"query_id": todo["query_id"], "answer": todo["answer"], "label": _rule(todo["answer"])}
    )
    path = root / "judgments.tsv"
    if path.exists():
        new = pd.concat([pd.read_csv(path, sep="\t", dtype=str), new], ignore_index=True)
    new.drop_duplicates(["query_id", "answer"]).to_csv(path, sep="\t", index=False)


def _labelled_bundle(root, layout: str = "per-system", sizes=None):
    """A bundle with one engine-drawn round (A and B only by default), labelled by the rule."""
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round

    write_bundle(root, layout)
    sizes = {"A": 8, "B": 6} if sizes is None else sizes
    drawn = sample_round(Bundle(root), sizes, seed=3, systems=sorted(sizes))
    Bundle(root).record_round(drawn)
    _label(root)
    return root


# ---------------------------------------------------------------------------------------------
# --adaptive


@pytest.mark.parametrize(
    ("layout", "bound"),
    [*((layout, "expected") for layout in LAYOUTS), ("parquet", "paper"),
     ("dataset", "exchangeable")],
)  # fmt: skip
def test_engine_plan_equals_the_in_memory_plan(tmp_path, layout, bound):
    """The planner fed from the engine's aggregates gives the in-memory planner's frame (sizes,
    half-widths, notes) on every layout and bound: for the unsampled system and a top-up."""
    import receval
    from receval.bundle import Bundle
    from receval.engine.adaptive import adaptive_sizes
    from receval.planning import adaptive_sample_sizes

    root = _labelled_bundle(tmp_path / "b", layout)
    task = receval.load_task(root)
    for systems, width in ((None, 0.1), (["A", "C"], 0.12), (["B"], 0.2)):
        memory = adaptive_sample_sizes(task, width, bound=bound, systems=systems)
        engine = adaptive_sizes(Bundle(root), width, bound=bound, systems=systems)
        pd.testing.assert_frame_equal(engine, memory, rtol=1e-9)
    assert memory["n"].gt(0).any()


def test_engine_plan_with_several_mask_words_and_units(tmp_path, monkeypatch):
    """kbp-sim (exhaustive units: the true-recall target and θ̂'s floor note), planned systems
    spread over several 64-bit mask words (WORD_BITS shrunk to 2), each width_for: the
    in-memory planner's frame."""
    import shutil

    import receval
    import receval.engine.adaptive as adaptive
    from receval.bundle import Bundle
    from receval.planning import adaptive_sample_sizes

    monkeypatch.setattr(adaptive, "WORD_BITS", 2)
    root = tmp_path / "kbp"
    shutil.copytree("data/kbp-sim", root)
    task = receval.load_task(root)
    systems = sorted(task.systems)[:5]
    for width, width_for in ((0.02, "both"), (0.03, "precision"), (0.004, "recall")):
        metrics = ("precision", "recall") if width_for == "both" else (width_for,)
        memory = adaptive_sample_sizes(task, width, systems=systems, metrics=metrics)
        engine = adaptive.adaptive_sizes(Bundle(root), width, systems=systems, width_for=width_for)
        pd.testing.assert_frame_equal(engine, memory, rtol=1e-9)
        assert memory["n"].gt(0).any() or memory["note"].str.contains("unreachable").any()


@pytest.mark.parametrize(("layout", "bound"), [("per-system", "expected"), ("parquet", "paper"),
                                             ("dataset", "exchangeable")])  # fmt: skip
def test_engine_plan_with_an_entity_relation_round_equals_the_in_memory_plan(
    tmp_path, layout, bound
):
    """A labelled uniform round, then an entity-relation round (queries with entities and
    slots): the existing mass M0(x) = Σ_j n_j s_j(x) per (system, query) cell in SQL, the
    draws' masses from their proposals; the in-memory planner's frame."""
    import receval
    from receval.bundle import Bundle
    from receval.engine.adaptive import adaptive_sizes
    from receval.engine.sampled import sample_round
    from receval.planning import adaptive_sample_sizes

    root = _labelled_bundle(tmp_path / "b", layout)
    queries = pd.read_csv(root / "queries.tsv", sep="\t", dtype=str)
    queries["entity"] = [f"e{i // 2}" for i in range(len(queries))]
    queries["slot"] = [("per:title", "org:members")[i % 2] for i in range(len(queries))]
    queries.to_csv(root / "queries.tsv", sep="\t", index=False)
    drawn = sample_round(Bundle(root), {"B": 5, "C": 7}, seed=5, systems=["B", "C"],
                         distribution="entity-relation")  # fmt: skip
    Bundle(root).record_round(drawn)
    _label(root)
    task = receval.load_task(root)
    assert "entity-relation" in {s.design for s in task.samplers}
    for systems, width in ((None, 0.1), (["A", "C"], 0.12), (["B"], 0.2)):
        memory = adaptive_sample_sizes(task, width, bound=bound, systems=systems)
        engine = adaptive_sizes(Bundle(root), width, bound=bound, systems=systems)
        pd.testing.assert_frame_equal(engine, memory, rtol=1e-9)
    assert memory["n"].gt(0).any()


def test_cli_adaptive_out_of_core_plans_as_in_memory(tmp_path):
    """`sample --adaptive --out-of-core` prints the in-memory plan and records the engine's
    hashed round with those sizes; a design it does not plan is a usage error."""
    roots = {k: _labelled_bundle(tmp_path / k) for k in ("memory", "engine")}
    args = ["--adaptive", "--target-width", "0.12", "--system", "A", "--system", "C"]
    runs = {
        k: CliRunner().invoke(cli, ["sample", str(root), *args, "--seed", "4", f"--{flag}"])
        for (k, root), flag in zip(roots.items(), ("in-memory", "out-of-core"), strict=True)
    }
    for result in runs.values():
        assert result.exit_code == 0, result.output
    plan = [line for line in runs["memory"].output.splitlines() if " n = " in line]
    assert plan and plan == [line for line in runs["engine"].output.splitlines() if " n = " in line]
    sizes = {k: _round_sizes(root, "round-2") for k, root in roots.items()}
    assert sizes["memory"] == sizes["engine"] and sum(sizes["engine"].values()) > 0


def _round_sizes(root, name: str) -> dict[str, int]:
    samples = pd.read_csv(root / "samples.tsv", sep="\t", dtype=str)
    return samples[samples["sample"] == name].groupby("system").size().to_dict()


def test_engine_adaptive_round_scores_unbiasedly(tmp_path):
    """A known-truth world: the engine-planned, engine-drawn --adaptive round (recorded
    ``prob`` the engine's), labelled by the rule and scored (joint estimator, bootstrap) puts
    every system's precision within two half-widths of the rule's share over its facts."""
    import receval

    root = _labelled_bundle(tmp_path / "b", sizes={"A": 5, "B": 5, "C": 5})
    args = ["sample", str(root), "--adaptive", "--target-width", "0.12", "--seed", "9"]
    result = CliRunner().invoke(cli, [*args, "--system", "A", "--system", "C", "--out-of-core"])
    assert result.exit_code == 0, result.output
    _label(root)
    outputs = receval.load_task(root).outputs
    truth = outputs.assign(c=_rule(outputs["answer"]) == "C").groupby("system")["c"].mean()
    board = receval.score(root).leaderboard.set_index("system")
    half = (board["precision_hi"] - board["precision_lo"]) / 2
    assert (half > 0).all()
    assert ((board["precision"] - truth.reindex(board.index)).abs() <= 2 * half).all()


# ---------------------------------------------------------------------------------------------
# --until-decided


@pytest.mark.parametrize("rank_by", ["precision", "pooled_recall"])
def test_engine_look_decides_as_in_memory(tmp_path, rank_by):
    """The engine's look: the in-memory open pairs, weights and focus counts; its floor draws'
    mixture_prob is q₀ of the drawn facts as the in-memory loop computes it; the round
    records, loads and scores on both paths."""
    import receval
    from receval.bundle import Bundle
    from receval.engine.until_decided import until_decided_round as engine_round
    from receval.estimators.anytime.stream import MIXTURE_COLUMN, drawn_floor_probabilities
    from receval.until_decided import until_decided_round

    root = _labelled_bundle(tmp_path / "b", sizes={"A": 30, "B": 30, "C": 30})
    task = receval.load_task(root)
    memory = until_decided_round(task, 40, seed=2, rank_by=rank_by)
    engine = engine_round(Bundle(root), 40, seed=2, rank_by=rank_by)
    assert engine.decisions.open_pairs == memory.decisions.open_pairs
    np.testing.assert_allclose(engine.decisions.weights, memory.decisions.weights, rtol=1e-9)

    def focus(drawn):
        rows = drawn.samples[drawn.samples[MIXTURE_COLUMN].isna()]
        return rows.groupby("system").size().to_dict()

    assert focus(engine) == focus(memory)
    assert list(engine.samples.columns) == list(memory.samples.columns)
    assert list(engine.to_annotate.columns) == list(memory.to_annotate.columns)
    Bundle(root).record_round(engine)
    loaded = receval.load_task(root)
    mixture = pd.to_numeric(loaded.samples[MIXTURE_COLUMN], errors="coerce")
    floor = loaded.samples[mixture.notna()]
    assert len(floor) == 8
    want = drawn_floor_probabilities(loaded, "uniform", floor["fact"].to_numpy(np.int64))
    np.testing.assert_allclose(mixture[mixture.notna()].to_numpy(float), want, rtol=1e-12)
    _label(root)
    options = {"intervals": "anytime", "rank_by": rank_by}
    on_disk = receval.score(root, out_of_core=True, **options).leaderboard
    pd.testing.assert_frame_equal(on_disk, receval.score(root, **options).leaderboard)


@pytest.mark.parametrize("what", ["entity-relation", "classes"])
@pytest.mark.parametrize("rank_by", ["precision", "pooled_recall"])
def test_engine_look_with_classes_or_entity_relation_rounds_decides_as_in_memory(
    tmp_path, what, rank_by
):
    """The looks' anytime intervals on the engine path now score entity-relation rounds and
    equivalence classes: the in-memory open pairs, weights and focus counts."""
    import receval
    from receval.bundle import Bundle
    from receval.engine.sampled import sample_round
    from receval.engine.until_decided import until_decided_round as engine_round
    from receval.estimators.anytime.stream import MIXTURE_COLUMN
    from receval.until_decided import until_decided_round

    root = _labelled_bundle(tmp_path / "b", sizes={"A": 30, "B": 30, "C": 30})
    if what == "entity-relation":
        drawn = sample_round(Bundle(root), {"A": 10, "C": 12}, seed=5, systems=["A", "C"],
                             distribution="entity-relation")  # fmt: skip
        Bundle(root).record_round(drawn)
        _label(root)
    else:  # the correct facts of a query in two classes by the answer's length
        judgments = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str)
        judgments["equivalence_class"] = np.where(
            judgments["label"] == "C", [f"e{len(a) % 2}" for a in judgments["answer"]], ""
        )
        judgments.to_csv(root / "judgments.tsv", sep="\t", index=False)
    task = receval.load_task(root)
    memory = until_decided_round(task, 40, seed=2, rank_by=rank_by)
    engine = engine_round(Bundle(root), 40, seed=2, rank_by=rank_by)
    assert engine.decisions.open_pairs == memory.decisions.open_pairs
    np.testing.assert_allclose(engine.decisions.weights, memory.decisions.weights, rtol=1e-9)

    def focus(drawn):
        rows = drawn.samples[drawn.samples[MIXTURE_COLUMN].isna()]
        return rows.groupby("system").size().to_dict()

    assert focus(engine) == focus(memory)


def test_engine_rounds_are_the_same_on_every_parquet_layout(tmp_path):
    """The engine's --adaptive plan-and-draw and --until-decided round: the same rows on
    one Parquet file, a dataset folder and per-system files."""
    from receval.bundle import Bundle
    from receval.engine.until_decided import until_decided_round

    rounds = []
    for layout in ("parquet", "dataset", "per-system"):
        root = _labelled_bundle(tmp_path / layout, layout, sizes={"A": 20, "B": 20, "C": 20})
        rounds.append(
            until_decided_round(
                Bundle(root), 30, seed=5, rank_by="precision", intervals="anytime-asymptotic"
            )
        )
    for other in rounds[1:]:
        pd.testing.assert_frame_equal(other.samples, rounds[0].samples)
        pd.testing.assert_frame_equal(other.to_annotate, rounds[0].to_annotate)
    import receval

    api = receval.sample(root, seed=5, until_decided=True, batch=30, rank_by="precision",
                         intervals="anytime-asymptotic", out_of_core=True)  # fmt: skip
    pd.testing.assert_frame_equal(api.samples, rounds[0].samples)


def test_cli_until_decided_takes_the_engine_path(tmp_path, monkeypatch):
    """Past ENGINE_PATH_ROWS `sample --until-decided` draws on the engine path (the round of
    --out-of-core), with ``--estimator ppi`` too; a round that fails while drawing leaves the
    bundle as it was."""
    import receval.engine.sampled as sampled
    import receval.engine.score as score

    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", 10)
    sizes = {"A": 20, "B": 20, "C": 20}
    roots = {k: _labelled_bundle(tmp_path / k, sizes=sizes) for k in ("auto", "explicit")}
    args = ["--until-decided", "--batch", "20", "--rank-by", "precision", "--seed", "3",
            "--intervals", "anytime-asymptotic"]  # fmt: skip
    auto = CliRunner().invoke(cli, ["sample", str(roots["auto"]), *args])
    assert auto.exit_code == 0, auto.output
    assert "in memory" not in auto.output
    explicit = CliRunner().invoke(cli, ["sample", str(roots["explicit"]), *args, "--out-of-core"])
    assert explicit.exit_code == 0, explicit.output
    assert (roots["auto"] / "samples.tsv").read_text() == (
        roots["explicit"] / "samples.tsv"
    ).read_text()
    _label(roots["auto"])
    before = {p.name: p.read_bytes() for p in roots["auto"].iterdir() if p.is_file()}

    def broken(*_args, **_kwargs):
        raise RuntimeError("killed while drawing")

    monkeypatch.setattr(sampled, "_floor_mixture", broken)
    failed = CliRunner().invoke(cli, ["sample", str(roots["auto"]), *args])
    assert failed.exit_code != 0
    after = {p.name: p.read_bytes() for p in roots["auto"].iterdir() if p.is_file()}
    assert after == before
    monkeypatch.undo()
    monkeypatch.setattr(score, "ENGINE_PATH_ROWS", 10)
    from test_bundle import _runs

    runs = _runs()
    judge = runs[["query_id", "answer"]].drop_duplicates()
    judge["judge_score"] = np.where(_rule(judge["answer"]) == "C", 0.8, 0.3)
    judge.to_csv(roots["auto"] / "judge.tsv", sep="\t", index=False)
    ppi = [*args, "--estimator", "ppi"]  # the looks with the judge: on the engine path too
    again = CliRunner().invoke(cli, ["sample", str(roots["auto"]), *ppi])
    assert again.exit_code == 0, again.output
    assert "in memory" not in again.output


# ---------------------------------------------------------------------------------------------
# Spark


@pytest.mark.slow
@needs_spark
def test_spark_plans_and_looks_as_duckdb(tmp_path):
    """On Spark (local) the --adaptive plan and the --until-decided round equal DuckDB's."""
    from receval.bundle import Bundle
    from receval.engine.adaptive import adaptive_sizes
    from receval.engine.until_decided import until_decided_round

    root = _labelled_bundle(tmp_path / "b", "per-system", sizes={"A": 20, "B": 20, "C": 10})
    plans = [
        adaptive_sizes(Bundle(root), 0.1, systems=["A", "C"], engine=name)
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(plans[1], plans[0], rtol=1e-9)
    looks = [
        until_decided_round(Bundle(root), 20, seed=4, rank_by="precision", engine=name)
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(looks[1].samples, looks[0].samples)
    pd.testing.assert_frame_equal(looks[1].to_annotate, looks[0].to_annotate)


@pytest.mark.slow
@needs_spark
def test_spark_plans_and_looks_with_an_entity_relation_round_as_duckdb(tmp_path):
    """An entity-relation round in samples.tsv: Spark's per-(system, query) existing mass and
    the looks' per-design floors give DuckDB's plan and round."""
    from receval.bundle import Bundle
    from receval.engine.adaptive import adaptive_sizes
    from receval.engine.sampled import sample_round
    from receval.engine.until_decided import until_decided_round

    root = _labelled_bundle(tmp_path / "b", "per-system", sizes={"A": 20, "B": 20, "C": 10})
    drawn = sample_round(Bundle(root), {"A": 6, "C": 8}, seed=5, systems=["A", "C"],
                         distribution="entity-relation")  # fmt: skip
    Bundle(root).record_round(drawn)
    _label(root)
    plans = [
        adaptive_sizes(Bundle(root), 0.1, systems=["A", "C"], engine=name)
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(plans[1], plans[0], rtol=1e-9)
    looks = [
        until_decided_round(Bundle(root), 20, seed=4, rank_by="precision", engine=name)
        for name in ("duckdb", "spark")
    ]
    pd.testing.assert_frame_equal(looks[1].samples, looks[0].samples)
