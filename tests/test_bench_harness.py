"""bench/harness.py records the commit of the checkout the measured children ran, found by
asking each child's interpreter (its options, ``PYTHONPATH`` and working directory), not the
one the benchmark script itself imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_bench


def _checkout(root: Path) -> tuple[Path, str]:
    """A git repository holding an empty ``receval`` package, one commit; (path, commit)."""
    (root / "receval").mkdir(parents=True)
    (root / "receval" / "__init__.py").write_text("")

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    git("init", "-q")
    git("add", "receval")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    return root.resolve(), git("rev-parse", "HEAD")


@pytest.fixture
def harness(monkeypatch):
    module = load_bench("harness")
    monkeypatch.setattr(module, "CHILD_CHECKOUTS", {})
    return module


@pytest.fixture
def two(tmp_path):
    """Two checkouts: ``a`` on PYTHONPATH, ``b`` the working directory."""
    return _checkout(tmp_path / "a"), _checkout(tmp_path / "b")


def _env(path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(path)}


@pytest.mark.parametrize(
    ("args", "winner"),
    [
        # -c and -m put the working directory first; run_child adds -P when PYTHONPATH is given
        (["-c", "pass"], "a"),
        (["-m", "json.tool", "--help"], "a"),
        (["-P", "-c", "pass"], "a"),  # -P: not the working directory, PYTHONPATH
        (["SCRIPT"], "a"),  # a script: its own folder first, then PYTHONPATH
        (["-E", "-P", "-c", "pass"], None),  # -E: PYTHONPATH ignored, the installed receval
        (["NICE", "-c", "pass"], "a"),  # nice -n 5 python -c: the python's (with -P added)
    ],
)
def test_the_child_checkout_is_the_one_its_interpreter_imports(
    harness, two, tmp_path, args, winner
):
    (a, _), (b, _) = two
    script = tmp_path / "script.py"
    script.write_text("import receval\n")
    args = [str(script) if x == "SCRIPT" else x for x in args]
    command = [sys.executable, *args]
    if args[0] == "NICE":
        command = ["nice", "-n", "5", sys.executable, *args[1:]]
    child = harness.run_child(command, env=_env(a), cwd=b)
    expected = {"a": str(a), "b": str(b)}.get(winner)
    if winner is None:  # the venv's own receval (editable or installed), neither of the two
        assert child.checkout not in (str(a), str(b))
    else:
        assert child.checkout == expected
    assert list(harness.CHILD_CHECKOUTS) == ([child.checkout] if child.checkout else [])


def test_the_stored_record_names_the_childrens_commit(harness, two, tmp_path):
    """The parent imports this worktree's receval; its children ran checkout ``a``: the
    record's commit is ``a``'s, and a second checkout timed in the same run is listed too."""
    (a, commit_a), (b, commit_b) = two
    harness.run_child([sys.executable, "-P", "-c", "pass"], env=_env(a), cwd=tmp_path)
    assert harness.git_commit() == commit_a
    out = tmp_path / "x.json"
    harness.store_result("x", "python bench/x.py", 0, {"n": 1}, out=out)
    record = harness.records(json.loads(out.read_text()))[-1]
    assert record["commit"] == commit_a and "commits" not in record
    harness.run_child([sys.executable, "-P", "-c", "pass"], env=_env(b), cwd=tmp_path)
    harness.store_result("x", "python bench/x.py --again", 0, {"n": 2}, out=out)
    record = harness.records(json.loads(out.read_text()))[-1]
    assert record["commit"] == commit_a
    assert record["commits"] == {str(a): commit_a, str(b): commit_b}


def test_without_children_the_commit_is_the_imported_receval(harness):
    import receval

    here = Path(receval.__file__).resolve().parents[1]
    assert harness.measured_checkout() == here
    assert harness.git_commit().split("+")[0] == harness.git_commit(here).split("+")[0]


def test_a_command_that_is_not_python_has_no_checkout(harness, tmp_path):
    child = harness.run_child(["true"], cwd=tmp_path)
    assert child.checkout is None and not harness.CHILD_CHECKOUTS


def _store_one(out: str, i: int) -> None:
    harness = load_bench("harness")
    harness.store_result("x", f"cmd {i}", 1, {"i": i}, out=out)


def test_runs_storing_at_once_keep_every_record(tmp_path: Path) -> None:
    """store_result reads, changes and writes the results file under a lock: 8 processes
    storing together keep 8 records (without the lock, one could drop another's)."""
    import multiprocessing

    out = str(tmp_path / "x.json")
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_store_one, args=(out, i)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    assert all(proc.exitcode == 0 for proc in procs)
    runs = json.loads(Path(out).read_text(encoding="utf-8"))["runs"]
    assert sorted(r["figures"]["i"] for r in runs) == list(range(8))


def test_a_child_with_an_explicit_pythonpath_imports_that_tree_whatever_the_cwd(
    tmp_path: Path,
) -> None:
    """run_child adds -P to ``python -m``/``-c`` children given a PYTHONPATH: run from a
    checkout, a baseline tree on PYTHONPATH is the one measured (``-m`` would put the working
    directory first)."""
    harness = load_bench("harness")
    here, _ = _checkout(tmp_path / "here")
    base, _ = _checkout(tmp_path / "base")
    code = "import receval, pathlib; print(pathlib.Path(receval.__file__).resolve().parents[1])"
    env = {**os.environ, "PYTHONPATH": str(base)}
    child = harness.run_child([sys.executable, "-c", code], env=env, cwd=here)
    assert Path(child.stdout.strip()) == base
