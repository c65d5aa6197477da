"""Loading a task bundle: formats, normalisation, duplicates, labels, references, task.toml."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DEFAULT_FILES, make_bundle

from receval.config import Matching, load_config
from receval.errors import BundleError
from receval.formats.tables import LINE, read_table, write_table
from receval.task import load_task, normalize_answers

NUMERIC = {"score", "prob", "weight"}


def convert_bundle(src: Path, dst: Path, suffix: str) -> Path:
    """Copy a TSV bundle as ``suffix`` tables (Parquet: numeric columns as floats)."""
    dst.mkdir()
    for path in src.iterdir():
        if path.suffix != ".tsv":
            (dst / path.name).write_bytes(path.read_bytes())
            continue
        frame = read_table(path).drop(columns=[LINE])
        if suffix == ".parquet":
            for col in NUMERIC & set(frame.columns):
                frame[col] = frame[col].astype(float)
        write_table(dst / f"{path.stem}{suffix}", frame)
    return dst


def comparable(task) -> dict[str, pd.DataFrame]:
    """The frames of a task without the columns that name the source file and line."""
    drop = ["_file", LINE]
    return {
        "queries": task.queries,
        "outputs": task.outputs,
        "raw_outputs": task.raw_outputs.drop(columns=drop),
        "facts": task.facts,
        "judgments": task.judgments.drop(columns=drop),
        "samples": task.samples.drop(columns=[LINE]),
        "exhaustive_units": task.exhaustive_units,
        "exhaustive": task.exhaustive.drop(columns=[LINE]),
        "labels": task.labels.to_frame(),
        "conflicts": task.merged.conflicts,
    }


def assert_same_task(a, b) -> None:
    left, right = comparable(a), comparable(b)
    for name in left:
        pd.testing.assert_frame_equal(left[name], right[name], obj=name)


# --------------------------------------------------------------------------------------------
# formats


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_csv_and_parquet_bundles_load_to_the_same_frames(tmp_path: Path, suffix: str):
    tsv = make_bundle(tmp_path)
    other = convert_bundle(tsv, tmp_path / f"as{suffix}", suffix)
    assert not list(other.glob("*.tsv"))
    a, b = load_task(tsv), load_task(other)
    assert_same_task(a, b)
    assert set(b.files) == set(a.files)
    assert all(p.suffix == suffix for k, p in b.files.items() if k != "task.toml")


def test_mixed_formats_in_one_bundle(tmp_path: Path):
    tsv = make_bundle(tmp_path)
    mixed = make_bundle(tmp_path, "mixed", judgments=None, queries=None)
    write_table(mixed / "judgments.csv", read_table(tsv / "judgments.tsv"))
    write_table(mixed / "queries.parquet", read_table(tsv / "queries.tsv"))
    assert_same_task(load_task(tsv), load_task(mixed))


def test_runs_folder_loads_like_runs_tsv(tmp_path: Path):
    tsv = make_bundle(tmp_path)
    runs = read_table(tsv / "runs.tsv").drop(columns=[LINE])
    files: dict[str, str | None] = {}
    for system, part in runs.groupby("system"):
        body = part.drop(columns=["system"])  # the system is the file stem
        lines = ["\t".join(body.columns)] + ["\t".join(r) for r in body.to_numpy().tolist()]
        files[f"runs/{system}.tsv"] = "\n".join(lines) + "\n"
    folder = make_bundle(tmp_path, "folder", runs=None, files=files)
    a, b = load_task(tsv), load_task(folder)
    assert_same_task(a, b)
    assert set(b.files) >= {"runs/A.tsv", "runs/B.tsv"}
    assert b.raw_outputs.loc[b.raw_outputs["system"] == "B", "_file"].str.endswith("B.tsv").all()


def test_runs_folder_mixed_formats_and_optional_columns(tmp_path: Path):
    """A score or team column in one run file only: the other file's rows get NaN / the system."""
    root = make_bundle(
        tmp_path,
        runs=None,
        judgments=None,
        samples=None,
        files={
            "runs/A.tsv": "system\tquery_id\tanswer\tteam\nA\tq1\tParis\tT1\n",
            "runs/B.csv": "query_id,answer,score\nq1,Lyon,0.25\nq2,Rome,\n",
            "runs/notes.txt": "ignored: not a table",
            "runs/._A.tsv": b"\x00\x05\x16\x07",  # hidden (e.g. macOS metadata): ignored
        },
    )
    pd.DataFrame(
        {"query_id": ["q3", "q3"], "answer": ["Madrid", "Seville"], "score": [0.5, np.nan]}
    ).to_parquet(root / "runs" / "C.parquet")
    task = load_task(root)
    out = task.outputs.set_index("system")
    assert task.systems == ["A", "B", "C"]
    assert task.teams == {"A": "T1", "B": "B", "C": "C"}
    assert math.isnan(out.loc["A", "score"])
    assert out.loc["B", "score"].tolist()[0] == 0.25
    assert math.isnan(out.loc["B", "score"].tolist()[1])
    assert out.loc["C", "answer"].tolist() == ["madrid", "seville"]
    assert out.loc["C", "score"].tolist()[0] == 0.5
    assert math.isnan(out.loc["C", "score"].tolist()[1])
    assert task.raw_outputs.loc[task.raw_outputs["system"] == "C", LINE].tolist() == [1, 2]


def test_blank_team_cells_take_the_systems_team(tmp_path: Path):
    runs = (
        "system\tteam\tquery_id\tanswer\n"
        "A\t\tq1\tParis\n"
        "A\tT1\tq2\tRome\n"
        "B\t\tq1\tParis\n"
        "C\tT1\tq3\tMadrid\n"
    )
    task = load_task(make_bundle(tmp_path, runs=runs, samples=None))
    assert task.teams == {"A": "T1", "B": "B", "C": "T1"}
    assert task.outputs["team"].tolist() == ["T1", "T1", "B", "T1"]
    assert task.summary()["teams"] == 2


# --------------------------------------------------------------------------------------------
# duplicates


def test_duplicates_collapse_keeping_the_max_score_and_counting(bundle: Path):
    task = load_task(bundle)
    assert len(task.raw_outputs) == 7
    assert len(task.outputs) == 6
    assert task.duplicate_rows == 1
    a_paris = task.outputs[(task.outputs["system"] == "A") & (task.outputs["query_id"] == "q1")]
    assert len(a_paris) == 1
    assert a_paris["score"].item() == 0.9
    assert a_paris["copies"].item() == 2
    assert a_paris["answer_raw"].item() == "Paris"  # the spelling of the kept (max-score) row
    assert (task.outputs["copies"].sum()) == len(task.raw_outputs)


def test_duplicate_collapse_with_missing_scores_and_provenance(tmp_path: Path):
    runs = (
        "system\tquery_id\tanswer\tscore\tprovenance\n"
        "A\tq1\tparis\t\tdoc1\n"  # no score
        "A\tq1\tPARIS\t0.2\tdoc2\n"
        "A\tq1\tParis \t0.7\tdoc3\n"  # max score: kept
        "A\tq2\tRome\t\tdoc4\n"
        "A\tq2\trome\t\tdoc5\n"  # no score at all: the first row is kept
        "B\tq1\tParis\t0.1\tdoc6\n"
    )
    task = load_task(make_bundle(tmp_path, runs=runs, judgments=None, samples=None))
    out = task.outputs.set_index(["system", "query_id"])
    assert out.loc[("A", "q1"), "score"] == 0.7
    assert out.loc[("A", "q1"), "provenance"] == "doc3"
    assert out.loc[("A", "q1"), "copies"] == 3
    assert math.isnan(out.loc[("A", "q2"), "score"])
    assert out.loc[("A", "q2"), "provenance"] == "doc4"
    assert out.loc[("A", "q2"), "copies"] == 2
    assert out.loc[("B", "q1"), "copies"] == 1
    assert task.duplicate_rows == 3
    assert task.summary()["duplicate output rows collapsed"] == 3
    # outputs keep the order of first appearance
    assert task.outputs["system"].tolist() == ["A", "A", "B"]


# --------------------------------------------------------------------------------------------
# normalisation


def test_normalize_answers_defaults():
    raw = pd.Series(["  Paris\t \n France ", "STRASSE", "Straße", "ＰＡＲＩＳ"])
    got = normalize_answers(raw, Matching())
    assert got.tolist() == ["paris france", "strasse", "strasse", "ｐａｒｉｓ"]


def test_normalize_answers_keeps_each_rows_answer_under_any_index():
    # a filtered or deduplicated frame (index not 0..n-1): each row keeps its own answer
    raw = pd.Series(["Paris", "ROME", "oslo", "Straße"], index=[5, 2, 9, 7])
    got = normalize_answers(raw, Matching())
    assert got.index.tolist() == [5, 2, 9, 7]
    assert got.tolist() == ["paris", "rome", "oslo", "strasse"]
    ascii_only = normalize_answers(raw.iloc[:3], Matching())
    assert ascii_only.tolist() == ["paris", "rome", "oslo"]


def test_normalize_answers_options():
    raw = pd.Series(["  Paris  France ", "ﬁne", "ＰＡＲＩＳ"])
    assert normalize_answers(raw, Matching(casefold=False)).tolist() == [
        "Paris France",
        "ﬁne",
        "ＰＡＲＩＳ",
    ]
    # full case folding already expands the "ﬁ" ligature; only NFKC maps full-width letters
    assert normalize_answers(raw, Matching(strip=False)).tolist() == [
        " paris france ",
        "fine",
        "ｐａｒｉｓ",
    ]
    assert normalize_answers(raw, Matching(collapse_whitespace=False)).tolist() == [
        "paris  france",
        "fine",
        "ｐａｒｉｓ",
    ]
    assert normalize_answers(raw, Matching(unicode="NFKC")).tolist() == [
        "paris france",
        "fine",
        "paris",
    ]
    nothing = Matching(strip=False, collapse_whitespace=False, casefold=False)
    assert normalize_answers(raw, nothing).tolist() == raw.tolist()


def _facts_of(tmp_path: Path, name: str, toml: str, answers: list[str]) -> pd.DataFrame:
    runs = "system\tquery_id\tanswer\n" + "".join(f"A\tq1\t{a}\n" for a in answers)
    root = make_bundle(
        tmp_path, name, task_toml=toml, runs=runs, judgments=None, samples=None, exhaustive=None
    )
    return load_task(root).outputs


def test_matching_in_task_toml(tmp_path: Path):
    answers = ["Paris", " paris", "PARIS ", "Ｐａｒｉｓ", "New  York", "new york"]
    default = _facts_of(tmp_path, "d", "", answers)
    assert default["answer"].tolist() == ["paris", "ｐａｒｉｓ", "new york"]
    assert default["copies"].tolist() == [3, 1, 2]
    nfkc = _facts_of(tmp_path, "n", '[matching]\nunicode = "NFKC"\n', answers)
    assert nfkc["answer"].tolist() == ["paris", "new york"]
    assert nfkc["copies"].tolist() == [4, 2]
    exact = _facts_of(
        tmp_path,
        "e",
        "[matching]\nstrip = false\ncasefold = false\ncollapse_whitespace = false\n",
        answers,
    )
    assert exact["answer"].tolist() == answers  # surrounding whitespace is not lost on reading
    assert exact["answer_raw"].tolist() == answers


def test_facts_are_shared_across_files_and_numbered_in_sorted_order(bundle: Path):
    task = load_task(bundle)
    facts = task.facts
    assert facts.index.name == "fact"
    assert list(facts.index) == list(range(len(facts)))
    keys = list(zip(facts["query_id"], facts["answer"], strict=True))
    assert keys == sorted(keys)
    # the same fact in runs, judgments, samples and exhaustive gets the same id
    paris = facts.index[(facts["query_id"] == "q1") & (facts["answer"] == "paris")].item()
    assert set(task.outputs.loc[task.outputs["query_id"] == "q1", "fact"]) == {paris}
    assert set(task.judgments.loc[task.judgments["query_id"] == "q1", "fact"]) == {paris}
    assert task.samples["fact"].iloc[0] == paris
    assert task.exhaustive["fact"].iloc[0] == paris
    assert facts.loc[paris, "systems"] == 2
    assert facts["in_pool"].all()


def test_fact_only_judged_or_found_is_not_in_the_pool(tmp_path: Path):
    root = make_bundle(
        tmp_path,
        judgments=DEFAULT_FILES["judgments.tsv"] + "q2\tVenice\tC\tann1\n",
        exhaustive="unit\tquery_id\tanswer\nd2\tq3\tSeville\n",
    )
    task = load_task(root)
    outside = task.facts[~task.facts["in_pool"]]
    assert sorted(outside["answer"]) == ["seville", "venice"]
    assert (outside["systems"] == 0).all()
    assert task.summary()["judged facts output by a system"] == 5
    assert task.summary()["judged facts"] == 6


def test_identifiers_are_stripped_but_answers_are_not(tmp_path: Path):
    runs = "system\tteam\tquery_id\tanswer\n A \tT1\t q1 \t Paris \n"
    root = make_bundle(tmp_path, runs=runs, samples=None)
    task = load_task(root)
    row = task.outputs.iloc[0]
    assert (row["system"], row["query_id"], row["answer"], row["answer_raw"]) == (
        "A",
        "q1",
        "paris",
        " Paris ",
    )


# --------------------------------------------------------------------------------------------
# labels


def test_labels_belong_to_the_fact_and_are_shared_by_systems(bundle: Path):
    task = load_task(bundle)
    labels = task.outputs["fact"].map(task.labels)
    by = dict(
        zip(zip(task.outputs["system"], task.outputs["answer"], strict=True), labels, strict=True)
    )
    # "paris" was judged twice (as "Paris" and "paris"): both systems that output it get 1
    assert by[("A", "paris")] == 1.0
    assert by[("B", "paris")] == 1.0
    assert by[("A", "rome")] == 1.0
    assert by[("B", "milan")] == 0.0
    assert by[("A", "barcelona")] == 0.5  # one C, one W: a tie under the default half policy
    votes = task.merged.votes.set_index("answer")
    assert votes.loc["paris", "correct"] == 2


def test_label_vocabulary_is_case_and_space_insensitive(tmp_path: Path):
    judgments = (
        "query_id\tanswer\tlabel\n"
        "q1\tParis\t c \n"
        "q2\tRome\tCORRECT\n"
        "q2\tMilan\tFalse\n"
        "q3\tMadrid\tYes\n"
        "q3\tBarcelona\t0\n"
    )
    task = load_task(make_bundle(tmp_path, judgments=judgments))
    got = dict(zip(task.judgments["answer"], task.judgments["value"], strict=True))
    assert got == {"paris": 1.0, "rome": 1.0, "milan": 0.0, "madrid": 1.0, "barcelona": 0.0}
    assert task.judgments["label_raw"].tolist() == ["c", "CORRECT", "False", "Yes", "0"]
    assert task.judgments["category"].tolist() == [
        "correct",
        "correct",
        "wrong",
        "correct",
        "wrong",
    ]


def test_custom_vocabulary_replaces_the_defaults(tmp_path: Path):
    toml = '[labels]\ncorrect = ["Y", "2"]\nwrong = ["N"]\n'
    judgments = "query_id\tanswer\tlabel\nq1\tParis\tY\nq2\tRome\t2\nq2\tMilan\tn\nq3\tMadrid\tX\n"
    task = load_task(make_bundle(tmp_path, task_toml=toml, judgments=judgments))
    assert task.judgments["value"].tolist() == [1.0, 1.0, 0.0, 0.0]  # X: inexact, counted wrong
    bad = judgments + "q3\tBarcelona\tC\n"
    with pytest.raises(BundleError) as info:
        load_task(make_bundle(tmp_path, "bad", task_toml=toml, judgments=bad))
    assert info.value.line == 6
    assert "'C'" in info.value.message


@pytest.mark.parametrize(
    ("policy", "value"), [("wrong", 0.0), ("correct", 1.0), ("ignore", float("nan"))]
)
def test_inexact_policy(tmp_path: Path, policy: str, value: float):
    toml = f'[labels]\ninexact_policy = "{policy}"\n'
    judgments = "query_id\tanswer\tlabel\nq1\tParis\tX\nq2\tRome\tinexact\nq2\tRome\tC\n"
    task = load_task(make_bundle(tmp_path, task_toml=toml, judgments=judgments))
    assert task.judgments["category"].tolist() == ["inexact", "inexact", "correct"]
    got = task.judgments["value"].to_numpy()
    np.testing.assert_array_equal(got, [value, value, 1.0])
    paris = task.facts.index[task.facts["answer"] == "paris"].item()
    rome = task.facts.index[task.facts["answer"] == "rome"].item()
    conflicts = task.merged.conflicts.set_index("fact")
    if policy == "ignore":
        assert paris not in task.labels.index
        assert conflicts.loc[paris, "kind"] == "all-ignored"  # listed, not dropped
        assert task.labels[rome] == 1.0
        assert rome not in conflicts.index
    elif policy == "wrong":
        assert task.labels[paris] == 0.0
        assert task.labels[rome] == 0.5  # X (wrong) against C: a tie
        assert conflicts.loc[rome, "kind"] == "tie"
    else:
        assert task.labels[paris] == 1.0
        assert task.labels[rome] == 1.0
        assert rome not in conflicts.index


@pytest.mark.parametrize(
    ("rule", "tie", "barcelona"),
    [
        ("majority", "half", 0.5),
        ("majority", "wrong", 0.0),
        ("majority", "correct", 1.0),
        ("majority", "unjudged", None),
        ("any-correct", "half", 1.0),
        ("unanimous", "half", 0.0),
    ],
)
def test_merge_settings_from_task_toml(tmp_path: Path, rule: str, tie: str, barcelona):
    toml = f'[merge]\nrule = "{rule}"\ntie = "{tie}"\n'
    task = load_task(make_bundle(tmp_path, task_toml=toml))
    fact = task.facts.index[task.facts["answer"] == "barcelona"].item()
    if barcelona is None:
        assert fact not in task.labels.index
    else:
        assert task.labels[fact] == barcelona
    assert fact in set(task.merged.conflicts["fact"])
    assert task.summary()["conflicts"] == 1


def test_truth(tmp_path: Path):
    truth = (
        "query_id\tanswer\tlabel\nq1\tParis\tC\nq1\tparis \tcorrect\nq2\tMilan\tW\nq3\tToledo\tC\n"
    )
    task = load_task(make_bundle(tmp_path, truth=truth))
    assert task.truth is not None
    assert list(task.truth.columns) == ["query_id", "answer", "fact", "value"]
    got = dict(zip(task.truth["answer"], task.truth["value"], strict=True))
    assert got == {"paris": 1.0, "milan": 0.0, "toledo": 1.0}  # the repeated fact once
    assert task.summary()["truth"] == "yes"
    assert load_task(make_bundle(tmp_path, "none")).truth is None


# --------------------------------------------------------------------------------------------
# the other tables


def test_queries_weights_and_extra_columns(tmp_path: Path):
    queries = "query_id\tweight\tentity\nq1\t2\tFrance\nq2\t0.5\tItaly\nq3\t1e0\tSpain\n"
    task = load_task(make_bundle(tmp_path, queries=queries))
    assert task.queries["weight"].tolist() == [2.0, 0.5, 1.0]
    assert task.queries["entity"].tolist() == ["France", "Italy", "Spain"]
    default = load_task(make_bundle(tmp_path, "d"))
    assert default.queries["weight"].tolist() == [1.0, 1.0, 1.0]
    assert LINE not in default.queries.columns


def test_extra_columns_are_kept(tmp_path: Path):
    root = make_bundle(
        tmp_path,
        runs="system\tquery_id\tanswer\trank\nA\tq1\tParis\t1\nB\tq2\tRome\t1\n",
        judgments="query_id\tanswer\tlabel\tnote\nq1\tParis\tC\tsure\n",
        samples="sample\tsystem\tquery_id\tanswer\tprob\tdesign\ns1\tA\tq1\tParis\t1\tuniform\n",
        exhaustive_units="unit\tsource\nd1\tnyt\nd2\tapw\n",
        exhaustive="unit\tquery_id\tanswer\toffset\nd1\tq1\tParis\t10-15\n",
    )
    task = load_task(root)
    assert task.outputs["rank"].tolist() == ["1", "1"]
    assert task.judgments["note"].tolist() == ["sure"]
    assert task.samples["design"].tolist() == ["uniform"]
    assert task.exhaustive_units["source"].tolist() == ["nyt", "apw"]
    assert task.exhaustive["offset"].tolist() == ["10-15"]


def test_samples_and_exhaustive(bundle: Path):
    task = load_task(bundle)
    assert task.samples["prob"].dtype == float
    assert task.samples["system"].tolist() == ["A", "A", "B"]
    assert task.samples[LINE].tolist() == [2, 3, 4]
    assert task.samples["answer_raw"].tolist() == ["Paris", "Barcelona", "Milan"]
    assert task.exhaustive_units["unit"].tolist() == ["d1", "d2"]
    assert task.exhaustive_units["prob"].isna().all()  # uniform when prob is absent
    assert task.exhaustive["unit"].tolist() == ["d1", "d1"]


def test_sample_drawn_twice_with_one_prob_is_fine(tmp_path: Path):
    samples = (
        DEFAULT_FILES["samples.tsv"]
        + "s1\tA\tq1\t paris\t0.3333333333\n"  # the same fact again, same prob
        + "s2\tA\tq1\tParis\t0.3333333333\n"  # another sample round
    )
    task = load_task(make_bundle(tmp_path, samples=samples))
    assert len(task.samples) == 5
    assert task.summary()["samples"] == 2


def test_optional_tables_absent(tmp_path: Path):
    root = make_bundle(
        tmp_path, judgments=None, samples=None, exhaustive_units=None, exhaustive=None
    )
    task = load_task(root)
    assert task.judgments.empty and task.samples.empty
    assert task.exhaustive_units.empty and task.exhaustive.empty
    assert task.labels.empty and task.merged.conflicts.empty
    assert set(task.files) == {"task.toml", "queries", "runs"}


def test_header_only_optional_tables_are_empty(tmp_path: Path):
    root = make_bundle(
        tmp_path,
        judgments="query_id\tanswer\tlabel\n",
        samples="sample\tsystem\tquery_id\tanswer\tprob\n",
        exhaustive_units="unit\n",
        exhaustive="unit\tquery_id\tanswer\n",
    )
    task = load_task(root)
    assert task.judgments.empty and task.samples.empty and task.exhaustive.empty
    assert task.summary()["judged facts"] == 0


def test_checksums(bundle: Path):
    task = load_task(bundle)
    sums = task.checksums()
    assert set(sums) == {p.name for p in bundle.iterdir()}
    for name, digest in sums.items():
        assert digest == hashlib.sha256((bundle / name).read_bytes()).hexdigest()


def test_name_defaults_to_the_folder(tmp_path: Path):
    assert load_task(make_bundle(tmp_path, "kbp-sim", task_toml=None)).name == "kbp-sim"
    assert load_task(make_bundle(tmp_path, "other")).name == "tiny"


# --------------------------------------------------------------------------------------------
# errors: the library raises BundleError with path, line and message (the CLI matrix covers
# every malformed case end to end; these check the error object itself)


def test_bundle_error_fields(tmp_path: Path):
    root = make_bundle(tmp_path, runs=DEFAULT_FILES["runs.tsv"] + "A\tT1\tq1\tLyon\tabc\n")
    with pytest.raises(BundleError) as info:
        load_task(root)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.path == str(root / "runs.tsv")
    assert err.line == 9
    assert str(err) == f"{root / 'runs.tsv'}:9: {err.message}"


def test_bundle_error_is_one_line():
    err = BundleError("x.tsv", None, "first\nsecond\t third")
    assert str(err) == "x.tsv: first second third"


def test_config_line_numbers_are_section_aware(tmp_path: Path):
    """``rule`` appears in two tables; the error points at the one in [merge]."""
    path = tmp_path / "task.toml"
    path.write_text(
        'name = "x"\n[matching]\nunicode = "NFC"\n\n[merge]\ntie = "half"\nrule = "max"\n'
    )
    with pytest.raises(BundleError) as info:
        load_config(path, "x")
    assert info.value.line == 7
    path.write_text('name = "x"\n[labels]\nrule = "C"\n[merge]\nrule = "majority"\n')
    with pytest.raises(BundleError) as info:
        load_config(path, "x")
    assert info.value.line == 3  # the unknown [labels] key, not [merge] rule


def test_config_defaults_and_values(tmp_path: Path):
    path = tmp_path / "task.toml"
    config = load_config(path, "fallback")
    assert (config.name, config.merge_rule, config.tie_policy, config.inexact_policy) == (
        "fallback",
        "majority",
        "half",
        "wrong",
    )
    path.write_text(
        'name = " n "\n[labels]\ninexact_policy = "ignore"\n[merge]\nrule = "unanimous"\n'
        'tie = "unjudged"\n[matching]\nunicode = "NFKC"\n[universe]\nsize = 1000\n'
    )
    config = load_config(path, "fallback")
    assert config.name == "n"
    assert config.inexact_policy == "ignore"
    assert (config.merge_rule, config.tie_policy) == ("unanimous", "unjudged")
    assert config.matching == Matching(unicode="NFKC")
    assert config.universe_size == 1000
    assert math.isnan(config.category_value()["inexact"])


# --------------------------------------------------------------------------------------------
# robustness: random damage to the files raises BundleError or loads, never anything else

DAMAGE = ["", "\t", ",", "\n", "\r\n", "\x00", "nan", "inf", "-1", "0", "1.5", "X", "I", "q9"]
DAMAGE += ['"', " ", "\u2028", "_line", "fact", "system", "prob", "1e999", "[merge]", "=", "\ufeff"]


def _damage(text: str, rng: np.random.Generator) -> bytes:
    for _ in range(int(rng.integers(1, 4))):
        op = rng.random()
        if op < 0.3 and text:  # cut a few characters
            i = int(rng.integers(len(text)))
            text = text[:i] + text[i + int(rng.integers(1, 9)) :]
        elif op < 0.7:  # insert a troublesome token
            i = int(rng.integers(len(text) + 1))
            text = text[:i] + DAMAGE[int(rng.integers(len(DAMAGE)))] + text[i:]
        else:  # copy one line over another
            lines = text.split("\n")
            i, j = rng.integers(len(lines), size=2)
            lines[i] = lines[j]
            text = "\n".join(lines)
    data = text.encode("utf-8")
    if rng.random() < 0.1:  # and sometimes an invalid byte
        i = int(rng.integers(len(data) + 1))
        data = data[:i] + b"\xff" + data[i:]
    return data


def test_damaged_bundles_raise_only_bundle_errors(tmp_path: Path):
    rng = np.random.default_rng(12345)
    names = sorted(DEFAULT_FILES)
    outcomes = {"loaded": 0, "error": 0}
    for k in range(150):
        name = names[int(rng.integers(len(names)))]
        root = make_bundle(tmp_path, f"b{k}", files={name: _damage(DEFAULT_FILES[name], rng)})
        try:
            load_task(root).summary()
            outcomes["loaded"] += 1
        except BundleError as err:
            assert "\n" not in str(err)
            assert err.path.startswith(str(root))
            outcomes["error"] += 1
    # both outcomes occur, so the damage is neither always harmless nor always fatal
    assert outcomes["loaded"] > 0 and outcomes["error"] > 0, outcomes


# --------------------------------------------------------------------------------------------
# Task.from_frames: the same builder as load_task, without files


def bundle_frames(root: Path) -> dict[str, pd.DataFrame]:
    """The bundle's tables as string frames, keyed by the from_frames argument names."""
    return {
        path.stem: read_table(path).drop(columns=[LINE])
        for path in root.iterdir()
        if path.suffix == ".tsv"
    }


@pytest.mark.parametrize("kind", ["pandas", "arrow"])
def test_from_frames_builds_the_task_load_task_builds(tmp_path: Path, kind: str):
    import pyarrow as pa

    from receval.task import Task

    root = make_bundle(tmp_path)
    frames = bundle_frames(root)
    if kind == "arrow":
        frames = {k: pa.Table.from_pandas(v, preserve_index=False) for k, v in frames.items()}
    config = load_config(root / "task.toml", default_name="x")
    built = Task.from_frames(**frames, config=config, name="in-memory")
    assert_same_task(load_task(root), built)
    assert built.name == "in-memory" and built.files == {}
    assert built.summary()["systems"] == load_task(root).summary()["systems"]


def test_from_frames_numeric_columns_and_derived_queries():
    from receval.task import Task

    runs = pd.DataFrame(
        {
            "system": ["A", "A", "B"],
            "query_id": [1, 2, 1],
            "answer": ["x", "y", "X "],
            "score": [0.5, np.nan, 2.0],
        }
    )
    judgments = pd.DataFrame({"query_id": [1], "answer": ["x"], "label": ["C"]})
    task = Task.from_frames(runs=runs, judgments=judgments)
    assert task.queries["query_id"].tolist() == ["1", "2"]
    assert task.outputs["score"].isna().tolist() == [False, True, False]
    assert task.facts["systems"].tolist() == [2, 1]  # "x" and "X " are one fact
    assert task.labels.tolist() == [1.0]
    assert task.name == "task"


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        (
            {"runs": pd.DataFrame({"query_id": ["q1"], "answer": ["a"]})},
            "runs: missing required column(s) system (columns are: query_id, answer)",
        ),
        (
            {
                "runs": pd.DataFrame(
                    {"system": ["A", "A"], "query_id": ["q1", "q9"], "answer": ["a", "b"]}
                ),
                "queries": pd.DataFrame({"query_id": ["q1"]}),
            },
            "runs:2: query_id 'q9' is not in queries (1 such rows)",
        ),
        (
            {
                "runs": pd.DataFrame({"system": ["A"], "query_id": ["q1"], "answer": ["a"]}),
                "judgments": pd.DataFrame(
                    {"query_id": ["q1", "q1"], "answer": ["a", "a"], "label": ["C", "maybe"]}
                ),
            },
            "judgments:2: unknown label 'maybe'",
        ),
        (
            {
                "runs": pd.DataFrame(
                    {"system": ["A", "A"], "query_id": ["q1", "q1"], "answer": ["a", "b"]}
                ),
                "samples": pd.DataFrame(
                    {
                        "sample": ["s"],
                        "system": ["A"],
                        "query_id": ["q1"],
                        "answer": ["a"],
                        "prob": [0.25],
                    }
                ),
            },
            "samples:1: prob 0.25 disagrees with the uniform design",
        ),
        (
            {"runs": pd.DataFrame({"system": [], "query_id": [], "answer": []}, dtype=object)},
            "no queries: the table has no rows",
        ),
    ],
)
def test_from_frames_errors_name_the_table_and_row(tables, message):
    from receval.task import Task

    with pytest.raises(BundleError) as err:
        Task.from_frames(**tables)
    assert message in str(err.value)


def test_load_task_checks_sample_designs(tmp_path: Path):
    samples = DEFAULT_FILES["samples.tsv"] + "s2\tA\tq1\tParis\t0.5\n"
    with pytest.raises(BundleError, match=r"samples.tsv:5: prob 0.5 disagrees"):
        load_task(make_bundle(tmp_path, samples=samples))


@pytest.mark.parametrize("suffix", [".tsv", ".parquet"])
def test_load_task_reads_only_the_parts_asked_for(tmp_path: Path, suffix: str):
    root = make_bundle(tmp_path)
    if suffix == ".parquet":
        root = convert_bundle(root, tmp_path / "as-parquet", suffix)
    full = load_task(root)
    part = load_task(root, tables=("judgments", "samples"), run_columns=("team",))
    assert part.outputs["score"].isna().all()  # not read: the sample needs no scores
    assert part.exhaustive_units.empty and "exhaustive_units" not in part.files
    assert part.truth is None
    cols = ["system", "team", "query_id", "answer", "fact", "copies"]
    pd.testing.assert_frame_equal(part.outputs[cols], full.outputs[cols])
    assert part.labels.equals(full.labels)
    with pytest.raises(ValueError, match="unknown table"):
        load_task(root, tables=("runs",))


def _python_normalize(text: str, matching: Matching) -> str:
    """The row-by-row definition normalize_answers vectorises."""
    import re
    import unicodedata

    if matching.unicode:
        text = unicodedata.normalize(matching.unicode, text)
    if matching.collapse_whitespace:
        text = re.sub(r"\s+", " ", text)
    if matching.strip:
        text = text.strip()
    if matching.casefold:
        text = text.casefold()
    return text


@pytest.mark.parametrize("unicode", ["none", "NFC", "NFKC"])
@pytest.mark.parametrize("casefold", [True, False])
def test_vectorised_normalisation_equals_the_python_definition(unicode: str, casefold: bool):
    tricky = [
        "  Paris ",
        "Stra\u00dfe",  # ß casefolds to ss, lower() keeps it
        "\u0130stanbul",  # dotted capital I
        "a\u00a0b\u2003c\u3000d",  # no-break, em and ideographic spaces
        "x\x1cy\x1dz\x85w",  # separators str.isspace accepts
        "e\u0301",  # combining accent (NFC composes)
        "\ufb01ne",  # ligature (NFKC decomposes, casefold too)
        "\u03a3\u0391\u03a3",  # Greek capitals
        "",
        "tab\there\nnewline",
    ]
    rng = np.random.default_rng(0)
    alphabet = list("aB ß\u00a0\t\u2028İΣ\u0301x")
    tricky += ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(200)]
    matching = Matching(casefold=casefold, unicode=None if unicode == "none" else unicode)
    got = normalize_answers(pd.Series(tricky), matching).tolist()
    assert got == [_python_normalize(t, matching) for t in tricky]


def test_with_annotation_keeps_a_with_replacement_unit_design():
    """draws/design columns of exhaustive_units survive with_annotation (θ̂'s weights need them)."""
    from receval.design import unit_weights
    from receval.task import Task, with_annotation

    task = Task.from_frames(pd.DataFrame({"system": ["A"], "query_id": ["q1"], "answer": ["x"]}))
    units = pd.DataFrame(
        {"unit": ["d1", "d2"], "prob": [0.5, 0.25], "draws": [2, 1], "design": "pps-wr"}
    )
    kept = with_annotation(task, exhaustive_units=units).exhaustive_units
    assert list(kept.columns) == ["unit", "prob", "draws", "design"]
    np.testing.assert_allclose(unit_weights(kept), [4.0, 4.0])


def test_docs_hold_the_contract_and_nothing_points_outside_the_clone():
    """A clone has no ../shared: the README and docstrings point to docs/contracts.md, which
    documents every task.toml section, the output files and the run.json keys."""
    root = Path(__file__).resolve().parents[1]
    texts = [root / "README.md", *root.glob("docs/*.md"), *root.glob("receval/**/*.py")]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        assert "ARCHITECTURE.md" not in text and "../shared/" not in text, path
    contracts = (root / "docs" / "contracts.md").read_text(encoding="utf-8")
    for needle in (
        "[official]",
        'average = "micro"',
        "leaderboard.csv",
        "run.json",
        "pooling_bias",
    ):
        assert needle in contracts, needle
    assert "contracts.md" in (root / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs/contracts.md" in (root / "README.md").read_text(encoding="utf-8")
