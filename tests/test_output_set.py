"""Output folders are written as one set: never a mix of runs, never half a run (issue 12)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import INTERRUPTED, cli
from receval.errors import BundleError
from receval.formats.output_set import MARKER, check_output_folder, output_set


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sets")
    a, b = root / "task-a", root / "task-b"
    for path, systems, seed in ((a, 8, 1), (b, 5, 2)):
        result = invoke(
            "simulate", path, "--systems", systems, "--queries", 40, "--per-system", 40,
            "--seed", seed,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    return a, b


def _consistent(out: Path) -> str | None:
    """The task whose complete set ``out`` holds (None if ``out`` is absent); fails on a mix."""
    if not out.exists():
        return None
    listed = (out / MARKER).read_text(encoding="utf-8").splitlines()[1:]
    present = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert sorted([*listed, MARKER]) == present, "files outside the recorded set"
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    board = pd.read_csv(out / "leaderboard.csv")
    checks = run["inputs"]["checksums"]
    assert len(board) == len(pd.read_csv(out / "annotation.csv"))
    curves = sorted(p.stem for p in (out / "curves").glob("*.csv"))
    assert curves == (sorted(board["system"]) if "target" in run else [])
    page = (out / "report.html").read_text(encoding="utf-8")
    assert run["created"] in page or run["task"] in page
    assert checks
    return run["task"]


def test_rescoring_another_task_leaves_nothing_of_the_first(tasks, tmp_path):
    a, b = tasks
    out = tmp_path / "out"
    assert invoke("score", a, "--out", out, "--bootstrap", 60, "--target-recall", 0.1,
                  "--anonymise", "--save-replicates").exit_code == 0  # fmt: skip
    assert (out / "leaderboard_anonymised.csv").exists() and (out / "replicates.npz").exists()
    result = invoke("score", b, "--out", out, "--bootstrap", 60)
    assert result.exit_code == 0, result.output
    assert _consistent(out) == "task-b"
    assert not (out / "curves").exists()
    assert not (out / "leaderboard_anonymised.csv").exists()
    assert not (out / "replicates.npz").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("x"), "is a file, not a folder"),
        (lambda p: (p.mkdir(), (p / "thesis.tex").write_text("x")), "not written by receval"),
    ],
)
def test_foreign_outputs_are_refused_with_one_line(tasks, tmp_path, make, message):
    out = tmp_path / "out"
    make(out)
    result = invoke("score", tasks[1], "--out", out, "--bootstrap", 60)
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and message in result.output
    assert "Traceback" not in result.output


def test_out_below_a_file_is_one_line(tasks, tmp_path):
    (tmp_path / "file").write_text("x")
    result = invoke("score", tasks[1], "--out", tmp_path / "file" / "sub", "--bootstrap", 60)
    assert result.exit_code == 2 and "is a file" in result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1


@pytest.mark.parametrize("command", ["report", "leaderboard"])
@pytest.mark.parametrize("content", [{"notes.txt": "mine"}, {}, {"run.json": "{}"}])
def test_readers_refuse_a_folder_receval_did_not_write(tmp_path, command, content):
    folder = tmp_path / "mine"
    folder.mkdir()
    for name, text in content.items():
        (folder / name).write_text(text)
    result = invoke(command, folder)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {folder}: ")
    assert "is not an output folder of `receval score`" in lines[0]
    assert "--out" not in lines[0]  # neither command has an --out option
    assert sorted(p.name for p in folder.iterdir()) == sorted(content)  # nothing written


def _plain_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def _interrupt_inside_an_import(*args, **kwargs):
    """Ctrl-C while a C extension initialises (scipy, imported lazily) surfaces as that
    import's ImportError caused by the KeyboardInterrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise ImportError("initialization failed") from exc


@pytest.mark.parametrize("interrupted", [_plain_interrupt, _interrupt_inside_an_import])
def test_ctrl_c_exits_130_saying_the_previous_set_was_kept(tmp_path, monkeypatch, interrupted):
    out = tmp_path / "out"
    with output_set(out) as folder:
        (folder / "run.json").write_text('{"receval_version": "x"}')
        (folder / "leaderboard.csv").write_text("system\nA\n")
    monkeypatch.setattr("receval.report.html.build_report", interrupted)
    result = invoke("report", out)
    assert result.exit_code == 130
    assert result.output.strip() == f"error: {INTERRUPTED}"
    assert "previous output set was kept" in INTERRUPTED
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "leaderboard.csv", "run.json"]


def test_failure_inside_the_set_leaves_the_previous_set(tmp_path):
    out = tmp_path / "out"
    with output_set(out) as folder:
        (folder / "run.json").write_text('{"receval_version": "x"}')
        (folder / "a.csv").write_text("1")
    with pytest.raises(RuntimeError), output_set(out) as folder:
        (folder / "b.csv").write_text("2")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "a.csv", "run.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    check_output_folder(out)  # a folder receval wrote is accepted again
    with pytest.raises(BundleError):
        check_output_folder(out / "a.csv")


def _score_process(task: Path, out: Path) -> subprocess.Popen:
    code = "from receval.cli import main; main()"
    args = [sys.executable, "-c", code, "score", str(task), "--out", str(out), "--quiet"]
    return subprocess.Popen(
        [*args, "--bootstrap", "200"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT handled as at a terminal: a test run started in the background by a shell without
    job control inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: generous: a score of a small task takes seconds, but minutes on a machine loaded tenfold
TIMEOUT = 900


def _interrupt_while_staging(task: Path, out: Path) -> subprocess.Popen:
    """A score of ``task`` into ``out``, sent SIGINT as soon as its staging folder exists
    (receval's code is running and the swap has not happened), whatever the machine's speed."""
    proc = _score_process(task, out)
    while proc.poll() is None:
        if any(p.name.startswith(f".{out.name}.staging-") for p in out.parent.iterdir()):
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.001)
    return proc


def test_sigint_at_any_point_never_leaves_a_mixed_folder(tasks, tmp_path):
    """Ctrl-C at several points of a re-scoring into a folder holding another task's set: every
    run leaves one complete set (never a mix, never a staging folder); interrupted while its
    staging folder exists it keeps the previous set and says so.  Interrupts at fractions of a
    first run's wall time land wherever the load puts them; the one sent while staging does
    not depend on timing (retried, with the previous set restored, if the run ended first)."""
    a, b = tasks
    out = tmp_path / "out"
    start = time.perf_counter()
    assert _score_process(a, out).wait(timeout=TIMEOUT) == 0
    full = time.perf_counter() - start
    seen, said = set(), set()

    def finished(proc: subprocess.Popen, point: object) -> str:
        _, err = proc.communicate(timeout=TIMEOUT)
        # interrupted while receval runs: exit 130 and one error line; a signal that lands
        # while the interpreter is still starting (before receval's code runs) ends it as -2
        assert proc.returncode in (0, 130, -signal.SIGINT), err
        if proc.returncode == 130:
            assert err.strip().splitlines()[-1] == f"error: {INTERRUPTED}"
            said.add(point)
        task = _consistent(out)
        assert task in {"task-a", "task-b"}
        seen.add(task)
        assert not [p for p in tmp_path.iterdir() if p.name != "out"], "staging left behind"
        return task

    for _ in range(3):  # before the swap: the previous set (task a) stays
        proc = _interrupt_while_staging(b, out)
        if finished(proc, "staging") == "task-a" and proc.returncode == 130:
            break
        assert _score_process(a, out).wait(timeout=TIMEOUT) == 0
    # interrupt a re-scoring of another task at several points through its run
    for fraction in (0.05, 0.3, 0.6, 0.85, 0.95, 1.2):
        proc = _score_process(b, out)
        time.sleep(full * fraction)
        proc.send_signal(signal.SIGINT)
        finished(proc, fraction)
    assert "task-a" in seen  # at least one interruption came before the swap
    assert said, "no interrupted run printed the error line"


def test_a_signal_released_after_the_swap_leaves_no_previous_folder(tmp_path, monkeypatch):
    """A Ctrl-C held back during the renames is delivered as they are released: the new set is
    in place and the previous folder is removed on that path too (once left behind in CI)."""
    import contextlib

    from receval.formats import output_set as module

    out = tmp_path / "out"
    with module.output_set(out) as folder:
        (folder / "a.csv").write_text("old\n")

    @contextlib.contextmanager
    def released_with_a_pending_signal():
        yield
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "_signals_held", released_with_a_pending_signal)
    with pytest.raises(KeyboardInterrupt), module.output_set(out) as folder:
        (folder / "a.csv").write_text("new\n")
    assert (out / "a.csv").read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_signal_just_after_the_staging_folder_is_made_leaves_no_staging(tmp_path, monkeypatch):
    """A Ctrl-C landing the instant the staging folder exists (the timed SIGINT test caught one
    there on a loaded machine, where holding signals does not stop one reaching another thread):
    the previous set stays and no staging folder is left."""
    from receval.formats import output_set as module

    out = tmp_path / "out"
    with module.output_set(out) as folder:
        (folder / "a.csv").write_text("old\n")
    made = Path.mkdir

    def mkdir_then_interrupted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        if ".staging-" in self.name:
            raise KeyboardInterrupt

    monkeypatch.setattr(Path, "mkdir", mkdir_then_interrupted)
    with pytest.raises(KeyboardInterrupt), module.output_set(out) as folder:
        (folder / "a.csv").write_text("new\n")
    assert (out / "a.csv").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_signal_between_the_two_renames_puts_the_previous_set_back(tmp_path, monkeypatch):
    """A Ctrl-C landing after the previous set was moved aside and before the new one is moved
    in (possible when another thread takes the signal): the previous set goes back, nothing else
    is left."""
    from receval.formats import output_set as module

    out = tmp_path / "out"
    with module.output_set(out) as folder:
        (folder / "a.csv").write_text("old\n")
    renamed = os.rename
    calls = []

    def interrupted_second_rename(src, dst):
        calls.append(src)
        if len(calls) == 2:  # moving the new set in
            raise KeyboardInterrupt
        renamed(src, dst)

    monkeypatch.setattr(module.os, "rename", interrupted_second_rename)
    with pytest.raises(KeyboardInterrupt), module.output_set(out) as folder:
        (folder / "a.csv").write_text("new\n")
    monkeypatch.undo()
    assert (out / "a.csv").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
