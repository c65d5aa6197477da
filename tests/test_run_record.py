"""run.json is one typed model (:mod:`receval.run_record`): every block round-trips exactly, files
written by older versions read with defaults, the report and ``leaderboard`` read only
:class:`RunRecord`; options are checked once; no per-run state is written into the context."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_bundle

import receval
from receval.cli import cli
from receval.report.writers import _jsonable
from receval.run_record import (
    BootstrapBlock,
    DesignBlock,
    IntervalsBlock,
    JudgeAuditBlock,
    JudgeBlock,
    OfficialBlock,
    OptionsBlock,
    RankingBlock,
    RunRecord,
    SystemTarget,
    TargetBlock,
)

ROOT = Path(__file__).resolve().parents[1]
#: run.json files written by receval before the typed model (a9341c7, on data/kbp-sim and a
#: simulated bundle with two judges; ``created`` masked): the model must read them unchanged
WRITTEN_BEFORE = Path(__file__).parent / "fixtures" / "run_records"

GRADED = (
    "query_id\tanswer\tjudge_score\tjudge\n"
    "q1\tParis\t3\tumbrela\n"
    "q2\tRome\t2\tumbrela\n"
    "q2\tMilan\t0\tumbrela\n"
    "q1\tParis\t0.9\tllm\n"
    "q2\tRome\t0.7\tllm\n"
)
SCALES = 'name = "tiny"\n\n[judge]\nscale = [0, 3]\n\n[judge.scales]\nllm = [0, 1]\n'

#: one score run per component the record has a block for
CASES = {
    "joint": [],
    "simple": ["--estimator", "simple"],
    "official": ["--estimator", "official", "--unjudged", "wrong", "--cutoff", "2"],
    "ppi": ["--estimator", "ppi"],
    "anytime": ["--intervals", "anytime"],
    "asymptotic": ["--intervals", "anytime-asymptotic", "--estimator", "ppi"],
    "target": [
        "--target-recall",
        "0.3",
        "--save-replicates",
        "--anonymise",
        "--anonymise-key",
        "k",
    ],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The output folder of every case of :data:`CASES` on the tiny bundle with a judge."""
    tmp = tmp_path_factory.mktemp("runs")
    root = make_bundle(tmp, files={"judge.tsv": GRADED, "task.toml": SCALES})
    out = {}
    for name, extra in CASES.items():
        args = ["score", str(root), "--out", str(tmp / name), "--bootstrap", "50", "--quiet"]
        result = CliRunner().invoke(cli, [*args, *extra])
        assert result.exit_code == 0, (name, result.output)
        out[name] = tmp / name
    return out


def _as_written(record: RunRecord) -> str:
    """The text ``run.json`` would hold for ``record`` (as :func:`write_json` writes it)."""
    return json.dumps(_jsonable(record.to_json()), indent=2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_run_json_round_trips_exactly_through_the_typed_record(runs, case):
    text = (runs[case] / "run.json").read_text("utf-8")
    data = json.loads(text)
    record = RunRecord.from_json(data)
    assert _as_written(record) + "\n" == text  # same keys, values and order
    assert RunRecord.from_json(record.to_json()) == record
    assert isinstance(record.options, OptionsBlock) and record.options.estimator
    if case == "official":
        assert record.bootstrap is None and isinstance(record.official, OfficialBlock)
        assert record.official.cutoff == 2 and record.design is None
    else:
        assert isinstance(record.bootstrap, BootstrapBlock)
        assert isinstance(record.design, DesignBlock)
        assert isinstance(record.ranking, RankingBlock)
    assert isinstance(record.judge_audit, JudgeAuditBlock)  # the bundle has a judge


def test_each_component_writes_its_typed_block(runs):
    read = {c: RunRecord.from_json(json.loads((runs[c] / "run.json").read_text())) for c in runs}
    assert isinstance(read["ppi"].judge, JudgeBlock) and read["joint"].judge is None
    assert set(read["ppi"].judge.systems) == {"A", "B"}
    assert read["ppi"].judge.combination is not None  # two judges: calibrated and combined
    assert isinstance(read["anytime"].intervals, IntervalsBlock)
    assert read["anytime"].intervals.method == "anytime" and read["anytime"].bootstrap.B == 0
    assert read["anytime"].ranking.procedure == "anytime"
    assert read["asymptotic"].intervals.guarantee.startswith("asymptotic")
    assert read["asymptotic"].ranking.procedure == "anytime-asymptotic"
    target = read["target"]
    assert isinstance(target.target, TargetBlock) and target.target_recall == 0.3
    assert all(isinstance(s, SystemTarget) for s in target.target.systems.values())
    assert target.replicates_file == "replicates.npz"
    assert target.anonymise.key == "--anonymise-key"
    assert read["joint"].intervals is None and read["joint"].looking is None


def test_the_api_writes_the_record_it_returns(tmp_path):
    root = make_bundle(tmp_path)
    result = receval.score(root, bootstrap=50, seed=3)
    result.write(tmp_path / "out", report=False)
    written = (tmp_path / "out" / "run.json").read_text("utf-8")
    assert written == _as_written(result.run) + "\n"
    assert result.run.bootstrap.seed == 3 and result.run.options.bootstrap == 50


@pytest.mark.parametrize("path", sorted(WRITTEN_BEFORE.glob("*.json")), ids=lambda p: p.stem)
def test_files_written_before_the_typed_model_read_unchanged(path):
    text = path.read_text("utf-8")
    record = RunRecord.from_json(json.loads(text))
    assert _as_written(record) + "\n" == text
    assert record.task and record.options.estimator and record.inputs.checksums


def test_an_older_or_hand_edited_file_reads_with_defaults():
    assert RunRecord.from_json({}).to_json() == {
        "receval_version": "",
        "task": "",
        "options": {},
        "bootstrap": None,
        "warnings": [],
        "created": "",
        "inputs": {},
    }
    old = {
        "receval_version": "0.0.1",
        "task": "t",
        "options": {"estimator": "joint", "retired_option": 1},
        "bootstrap": {"B": 10},
        "target": {"recall": 0.2, "systems": 5},
        "curves": {"A": "not an object"},
        "a_key_from_a_newer_version": [1, 2],
    }
    record = RunRecord.from_json(old)
    assert record.bootstrap.B == 10 and record.bootstrap.seed is None
    assert record.bootstrap.labels is None and record.ranking is None
    assert record.options.extra == {"retired_option": 1} and record.options.rank_by is None
    assert record.target.systems == {} and record.target_recall == 0.2
    assert record.system_curve("A").method is None and record.system_target("A").flags == ()
    assert record.extra == {"a_key_from_a_newer_version": [1, 2]}
    assert record.to_json()["a_key_from_a_newer_version"] == [1, 2]


def test_the_report_and_leaderboard_build_from_an_older_file(runs, tmp_path):
    import shutil

    from receval.report.html import read_report_inputs

    out = tmp_path / "old"
    shutil.copytree(runs["target"], out)
    data = json.loads((out / "run.json").read_text())
    for key in ("design", "ranking", "pooling_bias", "merge", "created"):
        data.pop(key)
    data["bootstrap"].pop("labels")
    (out / "run.json").write_text(json.dumps(data))
    inputs = read_report_inputs(out)
    assert isinstance(inputs.run, RunRecord)
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(cli, ["leaderboard", str(out)]).exit_code == 0


def test_the_report_reads_only_the_run_record():
    """No second model of run.json (RunView is gone) and no raw dict walk over the record in the
    report, the terminal table or the CLI's leaderboard."""
    assert not (ROOT / "receval" / "report" / "run_view.py").exists()
    raw = re.compile(r"\b(run|view|record|judge|target|boot|design|ranking)\.get\(|\.raw\b")
    for path in [*(ROOT / "receval" / "report").glob("*.py"), ROOT / "receval" / "judge_audit.py"]:
        source = path.read_text("utf-8")
        assert "RunView" not in source, path
        assert not raw.search(source), (path, raw.search(source))
    html = (ROOT / "receval" / "report" / "html.py").read_text("utf-8")
    assert "run: RunRecord" in html and "RunRecord.from_json(_read_run(" in html


def test_run_json_is_composed_in_one_place():
    """Only :func:`receval.run_record.run_record` constructs a RunRecord; run.json is written
    from it only (ScoreResult.write)."""
    sources = {p: p.read_text("utf-8") for p in (ROOT / "receval").rglob("*.py")}
    built = [p.name for p, s in sources.items() if re.search(r"\bRunRecord\(", s)]
    assert built == ["run_record.py"]
    writes = [p.name for p, s in sources.items() if re.search(r'"run\.json", ', s)]
    assert writes == ["api.py"]


def test_options_are_checked_once(monkeypatch, tmp_path):
    import receval.options as options
    from receval.options import CheckedOptions, ScoreOptions, check_score_options
    from receval.scoring import score_task
    from receval.task import load_task

    calls = []
    real = options._check_combinations
    monkeypatch.setattr(options, "_check_combinations", lambda o: calls.append(o) or real(o))
    root = make_bundle(tmp_path)
    receval.score(root, bootstrap=50)
    assert len(calls) == 1  # at the boundary, not again in score_task
    task = load_task(root)
    calls.clear()
    score_task(task, ScoreOptions(bootstrap=50))  # a library caller's plain options: checked
    assert len(calls) == 1
    checked = check_score_options(ScoreOptions(bootstrap=50))
    assert isinstance(checked, CheckedOptions)
    calls.clear()
    score_task(task, checked)
    assert calls == []


def test_inapplicable_options_are_refused_naming_the_component(tmp_path):
    from receval.errors import OptionError

    root = make_bundle(tmp_path)
    with pytest.raises(OptionError, match="unjudged applies to estimator='official' only"):
        receval.score(root, unjudged="wrong")
    with pytest.raises(ValueError, match="precision at a target recall has no anytime interval"):
        receval.score(root, intervals="anytime", target_recall=0.2)


def test_ppi_caches_live_in_the_run_s_estimator_not_in_the_context(tmp_path):
    from receval.estimators.base import ScoringContext
    from receval.estimators.registry import get_estimator
    from receval.estimators.sample_data import build_sample_data
    from receval.options import ScoreOptions
    from receval.task import load_task

    task = load_task(make_bundle(tmp_path, files={"judge.tsv": GRADED, "task.toml": SCALES}))
    ctx = ScoringContext(task, build_sample_data(task), ScoreOptions(estimator="ppi"))
    first, second = get_estimator("ppi"), get_estimator("ppi")
    assert first is not second and first.cache is not second.cache
    first.terms(ctx)
    assert set(vars(ctx)) == {"task", "data", "options"}  # nothing written into the context
    assert {"judge", "full"} <= set(first.cache.of(ctx)) and second.cache.of(ctx) == {}
    for path in (ROOT / "receval").rglob("*.py"):
        assert "ctx.__dict__" not in path.read_text("utf-8"), path
