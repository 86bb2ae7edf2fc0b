"""One rule, one place: no two modules import each other, every Miles name is written in one module, and the step
rows and the flag readers say each thing once (docs/architecture.md, "The packages")."""

from __future__ import annotations

import ast
import io
import keyword
import re
import tokenize
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
NAMES_MODULE = HARNESS / "lab" / "milesnames.py"


# --- no import circle ------------------------------------------------------------------------------------------


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The modules under `root` that `path` imports anywhere: at the top, inside functions, for the type checker.

    A package's `__init__` that imports its own modules is their front, not
    a dependency: importing any module of a package runs its `__init__` first.
    """
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            if path.name == "__init__.py" and target.startswith(name + "."):
                continue
            found.add(target)
    return found


def import_circles(root: Path) -> list[list[str]]:
    """Each set of modules under `root` that import one another, directly or around a longer circle."""
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {name: imports_of(path, root, set(paths)) for name, path in paths.items()}
    circles, order, low, stack, on_stack = [], {}, {}, [], set()

    def visit(name: str) -> None:  # Tarjan's strongly connected components
        order[name] = low[name] = len(order)
        stack.append(name)
        on_stack.add(name)
        for other in sorted(graph[name]):
            if other not in order:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], order[other])
        if low[name] == order[name]:
            members = []
            while not members or members[-1] != name:
                members.append(stack.pop())
                on_stack.discard(members[-1])
            if len(members) > 1:
                circles.append(sorted(members))

    for name in sorted(graph):
        if name not in order:
            visit(name)
    return circles


def test_no_two_harness_modules_import_each_other_even_inside_a_function() -> None:
    assert import_circles(HARNESS) == []


def test_a_circle_hidden_in_a_function_or_around_three_modules_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text("A = 1\ndef f():\n    from pkg.b import B\n")
    (package / "b.py").write_text("from . import a\nB = 2\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from ..sub import d\n")
    (package / "sub" / "d.py").write_text("import pkg.sub.e\n")
    (package / "sub" / "e.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import c\n"
    )

    assert import_circles(package) == [["pkg.a", "pkg.b"], ["pkg.sub.c", "pkg.sub.d", "pkg.sub.e"]]


# --- every Miles name in one module ----------------------------------------------------------------------------

# The spec: Miles's names the harness reads or writes (flags, filter paths, metric keys and their prefixes). The
# names module may hold more; each of its names is checked too. `--seed` is also the harness's own option
# (`harness run --seed`) and the simulator's `--time-scale` and `--miles` are options of `harness run` and `harness
# sim`: their spellings are not looked for.
MILES_NAMES = (
    "--rollout-batch-size",
    "--over-sampling-batch-size",
    "--n-samples-per-prompt",
    "--dynamic-sampling-filter-path",
    "--num-rollout",
    "--rollout-seed",
    "--rm-type",
    "--hf-checkpoint",
    "--prompt-data",
    "--actor-num-nodes",
    "--actor-num-gpus-per-node",
    "--colocate",
    "--rollout-num-gpus",
    "--rollout-max-response-len",
    "--partial-rollout",
    "--global-batch-size",
    "--lr",
    "--train-backend",
    "--eval-interval",
    "--eval-prompt-data",
    "--rollout-submission-granularity",
    "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter",
    "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std",
    "perf/rollout_time",
    "perf/step_time",
    "perf/total_train_time",
    "perf/train_time",
    "rollout/raw_reward",
    "rollout/raw_reward_unfiltered",
    "rollout/truncated_ratio",
    "rollout/dynamic_filter/",
    "rollout/dynamic_filter/drop_",
    "rollout/dynamic_filter/drop_zero_std_",
    "rollout/zero_std/",
    "rollout/zero_std/count_",
    "08752a12",
)
NOT_LOOKED_FOR = {"--seed", "--time-scale", "--miles"}


def names_module_values() -> set[str]:
    from harness.lab import milesnames

    return {
        value
        for name, value in vars(milesnames).items()
        if name.isupper() and isinstance(value, str) and value not in NOT_LOOKED_FOR
    }


def code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string the module's code holds: docstrings are prose, and are left out."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    strings = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
    return [(node.lineno, node.value) for node in sorted(strings, key=lambda node: (node.lineno, node.col_offset))]


def written_names(text: str, names: set[str]) -> set[str]:
    """The names `text` spells out whole (`--lr` is in `--lr 1e-6`, not in `--lr-decay`; a prefix ends the text)."""
    return {name for name in names if re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w./-])", text)}


def written_outside_the_names_module(names: set[str]) -> list[str]:
    return sorted(
        f"{path.relative_to(HARNESS)}:{line}: {name}"
        for path in sorted(HARNESS.rglob("*.py"))
        if path != NAMES_MODULE
        for line, text in code_strings(path)
        for name in written_names(text, names)
    )


def test_every_miles_name_is_written_in_the_names_module_only() -> None:
    assert written_outside_the_names_module(set(MILES_NAMES)) == []


def test_every_name_the_names_module_holds_is_written_there_only() -> None:
    assert written_outside_the_names_module(names_module_values()) == []


def test_the_names_module_holds_the_spec_and_every_flag_it_names_is_in_its_list() -> None:
    from harness.lab import milesnames

    held = names_module_values()
    assert set(MILES_NAMES) <= held, sorted(set(MILES_NAMES) - held)
    flags = {value for name, value in vars(milesnames).items() if name.endswith("_FLAG")}
    assert flags == set(milesnames.FLAGS)
    # It imports nothing of the harness: the lab image and the simulator's carry harness/lab/ alone.
    imports = [node for node in ast.walk(ast.parse(NAMES_MODULE.read_text())) if isinstance(node, ast.ImportFrom)]
    assert all(node.module == "__future__" for node in imports)


def test_a_name_is_found_where_it_is_written_whole_and_not_in_docstrings(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Takes --rollout-batch-size."""\n'
        'A = f"--rollout-batch-size {1}"\n'
        'B = "--rollout-batch-sizes"\n'
        'C = f"rollout/zero_std/count_{2}"\n'
        'D = "rollout/raw_reward_unfiltered"\n'
    )
    names = {"--rollout-batch-size", "rollout/zero_std/count_", "rollout/raw_reward"}

    assert [(line, written_names(text, names)) for line, text in code_strings(module)] == [
        (2, {"--rollout-batch-size"}),
        (3, set()),
        (4, {"rollout/zero_std/count_"}),
        (5, set()),
    ]


# --- each thing said once --------------------------------------------------------------------------------------


def string_templates(path: Path) -> list[str]:
    """Every string the module's code writes, an f-string with `{}` where it puts a value."""

    def text(node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            return str(node.value)
        assert isinstance(node, ast.JoinedStr)
        return "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values)

    tree = ast.parse(path.read_text())
    parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    return [
        text(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))
        if id(node) not in parts
    ]


def test_each_note_of_the_step_rows_is_spelled_once() -> None:
    modules = ("rows.py", "overlaps.py", "group_counts.py")  # the step rows, split along their seams
    notes = [text for name in modules for text in string_templates(HARNESS / "summary" / name) if "{steps}" in text]
    repeated = sorted({text for text in notes if notes.count(text) > 1})
    assert len(notes) > 20 and repeated == []


def line_shapes(source: str) -> list[tuple[int, str]]:
    """(line, shape) of each line of code: names, strings and numbers blanked; comments, lone punctuation and
    imports passed over (as a reader skims for the same code written twice)."""
    imports = {
        line
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    shapes: dict[int, list[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if not token.string.strip() or token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
            word = "N"
        elif token.type == tokenize.STRING:
            word = "S"
        elif token.type == tokenize.NUMBER:
            word = "0"
        else:
            word = token.string
        shapes.setdefault(token.start[0], []).append(word)
    return [
        (line, " ".join(words))
        for line, words in sorted(shapes.items())
        if any(word[0].isalnum() for word in words) and line not in imports
    ]


def same_shape_runs(source: str, least: int = 6) -> list[tuple[int, int]]:
    """(first line, first line of the copy) of each run of `least` or more lines of code that stands twice."""
    shapes = line_shapes(source)
    runs = []
    for gap in range(1, len(shapes)):
        length = 0
        for i in range(len(shapes) - gap):
            length = length + 1 if shapes[i][1] == shapes[i + gap][1] else 0
            ends_here = i + 1 == len(shapes) - gap or shapes[i + 1][1] != shapes[i + 1 + gap][1]
            if length >= least and ends_here and length <= gap:
                runs.append((shapes[i - length + 1][0], shapes[i - length + 1 + gap][0]))
    return sorted(runs)


@pytest.mark.parametrize("module", ["sim/config.py", "mileslog/keys.py"])
def test_no_code_stands_twice_in_the_flag_readers(module: str) -> None:
    assert same_shape_runs((HARNESS / module).read_text()) == []


def test_code_written_twice_with_other_names_is_found() -> None:
    body = (
        "    if a is None:\n        b = c(d)\n    elif e:\n        f = g[h]\n    else:\n        i = 1\n    return j\n"
    )
    source = f"def one(a):\n{body}\n\ndef two(x):\n{body.replace('a', 'x')}\n"

    assert same_shape_runs(source) == [(1, 11)]
    assert same_shape_runs(source.replace("        f = g[h]\n", "        f = g[h]\n        k()\n", 1)) == []
