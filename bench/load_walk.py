"""Benchmark: how loading a bundle walks through receval's modules (issue 35's measures).

Traces every Python call (``sys.setprofile``) while ``load_task`` loads a bundle (default
``data/kbp-sim``), and while ``api.score`` scores it (``--bootstrap`` replicates, default 50), in a fresh
child process per checkout, so one run compares two checkouts (``--before``, default
``/work/main``; ``--after``, default this checkout).  For each step it counts, over calls from a
receval function to a receval function defined in another file:

* ``files``: the receval source files a function was called in;
* ``edges``: distinct cross-file call edges (caller function → callee function);
* ``mutual``: pairs of files that call each other (both directions happen: control bounces
  between them);
* ``reading_out`` / ``reading_inside``: cross-file edges with one end / both ends in the
  bundle's reading (``receval.task`` and the ``receval.bundle`` package): how often loading
  leaves that code for ``formats``, ``config``, ``judge`` ... and comes back, against the
  edges between the reading's own modules;
* ``climbs``: cross-file edges against the import graph — the callee's module imports the
  caller's (transitively), so the lower module calls back up (a callback, an overridden method);
  the import graph is the one ``tests/test_import_graph.py`` reads from each checkout's source.

The figures depend on the code only (not on the machine): a call's count is its distinct
edge, not how often it runs.

Usage: python bench/load_walk.py [--before DIR] [--after DIR] [--task DIR] [--bootstrap B]
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

HERE = Path(__file__).resolve().parents[1]


def _import_graph(checkout: Path) -> dict[str, set[str]]:
    """Module -> modules it imports (runtime imports, any level), read from ``checkout``."""
    spec = importlib.util.spec_from_file_location(
        "_walk_graph", checkout / "tests" / "test_import_graph.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.import_graph(type_checking=False)


def _reachable(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        out[start] = seen
    return out


def _module(path: str, package: Path) -> str | None:
    if path.startswith("<"):  # <frozen importlib...>, <string> (generated dataclass methods)
        return None
    try:
        rel = Path(path).resolve().relative_to(package)
    except ValueError:
        return None
    parts = ("receval", *rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def trace(step: str, task: Path, bootstrap: int) -> dict:
    """Child process: the cross-file call edges of one step, as JSON-able lists."""
    import receval

    package = Path(receval.__file__).resolve().parent
    modules: dict[str, str | None] = {}
    edges: set[tuple[str, str, str, str]] = set()
    files: set[str] = set()

    def where(code) -> str | None:
        name = code.co_filename
        if name not in modules:
            modules[name] = _module(name, package)
        return modules[name]

    def hook(frame, event, arg) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":  # not a module's import
            return
        callee = where(frame.f_code)
        if callee is None:
            return
        files.add(callee)
        back = frame.f_back
        caller = where(back.f_code) if back is not None else None
        if caller is not None and caller != callee and back.f_code.co_name != "<module>":
            edges.add((caller, back.f_code.co_name, callee, frame.f_code.co_name))

    if step == "load":
        from receval.task import load_task

        sys.setprofile(hook)
        load_task(task)
    else:
        from receval.api import score

        sys.setprofile(hook)
        score(task, bootstrap=bootstrap, seed=0)
    sys.setprofile(None)
    return {"files": sorted(files), "edges": sorted(edges), "root": str(package.parent)}


def figures(record: dict, graph: dict[str, set[str]]) -> dict:
    """The counts of one traced step (see the module docstring)."""
    above = _reachable(graph)  # module -> everything it imports, transitively
    edges = [tuple(e) for e in record["edges"]]
    pairs = {(a, b) for a, _, b, _ in edges}
    mutual = sorted({" <-> ".join(sorted((a, b))) for a, b in pairs if (b, a) in pairs})
    climbs = [e for e in edges if e[0] in above.get(e[2], set())]
    per_file: dict[str, int] = defaultdict(int)
    for caller, *_ in edges:
        per_file[caller] += 1

    def reading(module: str) -> bool:
        return module == "receval.task" or module.split(".")[:2] == ["receval", "bundle"]

    ends = [reading(a) + reading(b) for a, _, b, _ in edges]
    return {
        "files": len(record["files"]),
        "edges": len(edges),
        "reading_out": ends.count(1),
        "reading_inside": ends.count(2),
        "mutual": len(mutual),
        "climbs": len(climbs),
        "mutual_pairs": mutual,
        "edges_from": dict(sorted(per_file.items())),
        "climb_edges": [f"{a}.{f} -> {b}.{g}" for a, f, b, g in climbs],
    }


def measure(checkout: Path, task: Path, bootstrap: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1"}
    graph = _import_graph(checkout)
    out = {}
    for step in ("load", "score"):
        child = harness.run_child(
            [sys.executable, __file__, "--child", step, "--task", str(task),
             "--bootstrap", str(bootstrap)],
            env=env,
        )  # fmt: skip
        record = json.loads(child.stdout.strip().splitlines()[-1])
        assert Path(record["root"]) == checkout.resolve(), (record["root"], checkout)
        out[step] = figures(record, graph)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--before", type=Path, default=Path("/work/main"))
    parser.add_argument("--after", type=Path, default=HERE)
    parser.add_argument("--task", type=Path, default=HERE / "data" / "kbp-sim")
    parser.add_argument("--bootstrap", type=int, default=50)
    parser.add_argument("--child", choices=("load", "score"), help=argparse_suppress())
    args = harness.parse(parser, argv)
    if args.child:
        print(json.dumps(trace(args.child, args.task, args.bootstrap)))
        return
    result = {
        "before": {"checkout": str(args.before), "commit": harness.git_commit(args.before)},
        "after": {"checkout": str(args.after), "commit": harness.git_commit(args.after)},
    }
    for side in ("before", "after"):
        result[side].update(measure(getattr(args, side), args.task, args.bootstrap))
    keys = ("files", "edges", "reading_out", "reading_inside", "mutual", "climbs")
    for step in ("load", "score"):
        print(f"{step}: " + "  ".join(
            f"{k} {result['before'][step][k]} -> {result['after'][step][k]}" for k in keys
        ))  # fmt: skip
        for side in ("before", "after"):
            print(f"  {side} climbs: {result[side][step]['climb_edges']}")
    if not args.no_store:
        harness.store_result(
            "load_walk", harness.command("load_walk", argv), None, result, title="load walk"
        )


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
