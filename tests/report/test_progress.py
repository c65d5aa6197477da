"""receval.progress: a bar on a terminal after the delay; nothing when quiet, piped or short."""

from __future__ import annotations

import io

import pytest

from receval.progress import progress


class FakeTerminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_terminal_shows_bar_with_label_and_count():
    term = FakeTerminal()
    with progress(list(range(40)), "bootstrap", file=term, delay=0.0) as items:
        seen = list(items)
    assert seen == list(range(40))
    out = term.getvalue()
    assert "bootstrap" in out
    assert "40/40" in out  # show_pos: the final position over the length


def test_length_mode_update_counts():
    term = FakeTerminal()
    with progress(1000, "replicates", file=term, delay=0.0) as bar:
        for _ in range(4):
            bar.update(250)
        assert bar.shown
        assert bar.done == 1000
    assert "1000/1000" in term.getvalue()


@pytest.mark.parametrize("quiet", [True, False])
def test_not_a_terminal_prints_nothing(quiet):
    pipe = io.StringIO()  # isatty() is False
    with progress(range(10), "curves", quiet, file=pipe, delay=0.0) as items:
        assert sum(items) == 45
    assert pipe.getvalue() == ""


def test_quiet_on_a_terminal_prints_nothing():
    term = FakeTerminal()
    with progress(10, "curves", True, file=term, delay=0.0) as bar:
        bar.update(10)
        assert not bar.shown
    assert term.getvalue() == ""


def test_short_runs_print_nothing():
    term = FakeTerminal()
    with progress(range(5), "sampling", file=term, delay=3600.0) as items:
        assert list(items) == [0, 1, 2, 3, 4]
        assert not items.shown
    assert term.getvalue() == ""


def test_bar_appears_once_the_delay_has_passed():
    ticks = iter([0.0, 0.5, 2.0, 2.5])  # enter, update, update, update
    term = FakeTerminal()
    bar = progress(4, "bootstrap", file=term, delay=1.0)
    bar._clock = lambda: next(ticks)  # a fake clock: 0.5 s after start nothing, 2 s after, the bar
    with bar:
        bar.update(1)
        assert not bar.shown and term.getvalue() == ""
        bar.update(1)
        assert bar.shown
        bar.update(2)
    assert "4/4" in term.getvalue() and "bootstrap" in term.getvalue()


def test_length_mode_is_not_iterable():
    with pytest.raises(TypeError):
        list(progress(3, "x", file=io.StringIO()))


def test_default_stream_is_stderr_and_silent_under_pytest(capsys):
    with progress(range(3), "curves", delay=0.0) as items:
        list(items)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_stage_relabels_the_innermost_bar_and_nothing_without_one():
    """Long steps say which stage runs (``score --intervals anytime``: the stream, precision,
    pooled recall, recall and F1, the paired tests) on the bar they run under."""
    import io

    from receval.progress import Progress, stage

    stage("no bar: nothing happens")
    out = io.StringIO()
    clock = iter([0.0, 0.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]).__next__
    with Progress(None, 5, "scoring", out, delay=1.0, clock=clock) as bar:
        stage("anytime: precision sequences (70 systems)")
        assert bar.label == "scoring: anytime: precision sequences (70 systems)"
        stage("")
        assert bar.label == "scoring"
    stage("after the bar: nothing happens")
    assert "anytime: precision" in out.getvalue()


def test_a_stage_detail_says_how_far_the_stage_is():
    """Within a long stage (the θ grid's cells, the pairs' chunks) the bar says how far it is,
    after the stage's own label; a new stage drops the detail."""
    import io

    from receval.progress import Progress, stage, stage_detail

    stage_detail("no bar: nothing happens")
    out = io.StringIO()
    clock = iter([0.0, 0.0] + [5.0] * 10).__next__
    with Progress(None, 5, "scoring", out, delay=1.0, clock=clock) as bar:
        stage("anytime: f1's lower ends over the θ grid (70 systems)")
        stage_detail("cell 5/23 of the θ grid (70 systems)")
        assert bar.label == (
            "scoring: anytime: f1's lower ends over the θ grid (70 systems), "
            "cell 5/23 of the θ grid (70 systems)"
        )
        stage("anytime: paired tests of f1 (2415 pairs)")
        assert bar.label == "scoring: anytime: paired tests of f1 (2415 pairs)"
    assert "cell 5/23" in out.getvalue()
