"""The house rules of docs/architecture.md ("Sizes and imports"): imports a reader can see, short signatures,
modules and functions that fit on a few screens, and few modules loose at the top of `harness/`.

Each rule is a pure function of a source tree, checked here on the harness and on a small tree that breaks it.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8  # outside cli/, where typer's options are the parameters
MAX_INNER_IMPORTS = 10  # of the harness's own modules, inside functions, outside cli/
MAX_LOOSE_MODULES = 4
TABLE_MARK = "# table:"  # a long function whose body is a table says so, and why, on its `def` line or the next
# Third-party imports a leaf may keep lazy: they cost a second or more to import, or need the extra they ship in.
HEAVY = frozenset({"numpy", "scipy", "matplotlib", "pyarrow", "ray", "tensorboard", "tbparse", "wandb", "pandas"})
HEAVY |= {"statsmodels", "adastop", "rliable", "pynvml", "docker", "hypothesis"}


def sources(root: Path) -> list[tuple[str, str]]:
    """Each module under `root` as (its path from `root`'s parent, its text)."""
    return [(path.relative_to(root.parent).as_posix(), path.read_text()) for path in sorted(root.rglob("*.py"))]


def in_cli(rel: str) -> bool:
    return "/cli/" in rel


def comments_by_line(text: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string
    return found


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def long_modules(root: Path) -> list[str]:
    return [f"{rel}: {n} lines" for rel, text in sources(root) if (n := len(text.splitlines())) > MAX_MODULE_LINES]


def long_functions(root: Path) -> list[str]:
    """Functions over the limit whose `def` line (or the line after) does not say why a table needs the room."""
    found = []
    for rel, text in sources(root):
        comments = comments_by_line(text)
        for fn in functions(ast.parse(text)):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            first = fn.body[0].lineno
            marked = any(comments.get(line, "").startswith(TABLE_MARK) for line in range(fn.lineno, first + 1))
            if length > MAX_FUNCTION_LINES and not marked:
                found.append(f"{rel}:{fn.lineno} {fn.name}: {length} lines")
    return found


def long_signatures(root: Path) -> list[str]:
    found = []
    for rel, text in sources(root):
        if in_cli(rel):
            continue
        for fn in functions(ast.parse(text)):
            args = fn.args
            named = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg not in ("self", "cls")]
            count = len(named) + (args.vararg is not None) + (args.kwarg is not None)
            if count > MAX_PARAMETERS:
                found.append(f"{rel}:{fn.lineno} {fn.name}: {count} parameters")
    return found


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return ["harness" if node.level else (node.module or "")]
    return [alias.name for alias in node.names]


def inner_imports(root: Path) -> tuple[list[str], list[str]]:
    """Imports inside functions, outside cli/: (those of the harness's own modules, those of heavy libraries)."""
    own, heavy = [], []
    for rel, text in sources(root):
        if in_cli(rel):
            continue
        comments = comments_by_line(text)
        for fn in functions(ast.parse(text)):
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                where = f"{rel}:{node.lineno} {comments.get(node.lineno, '(no reason on its line)')}"
                tops = {name.split(".")[0] for name in _imported(node)}
                if "harness" in tops:
                    own.append(where)
                elif tops <= HEAVY:
                    heavy.append(where)
    return sorted(set(own)), sorted(set(heavy))


def loose_modules(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


# --- the harness ---------------------------------------------------------------------------------------------


def test_no_module_is_over_600_lines() -> None:
    assert long_modules(HARNESS) == []


def test_no_function_is_over_80_lines_unless_its_table_says_why() -> None:
    assert long_functions(HARNESS) == []


def test_no_function_outside_the_cli_takes_more_than_8_parameters() -> None:
    assert long_signatures(HARNESS) == []


def test_few_imports_of_the_harness_sit_inside_functions_each_with_its_reason() -> None:
    own, _ = inner_imports(HARNESS)
    assert len(own) <= MAX_INNER_IMPORTS, own
    assert [where for where in own if where.endswith("(no reason on its line)")] == []


def test_at_most_four_modules_are_loose_at_the_top_of_the_harness() -> None:
    assert len(loose_modules(HARNESS)) <= MAX_LOOSE_MODULES, loose_modules(HARNESS)


# --- each rule catches what breaks it ------------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "harness"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_long_module_and_a_long_function_are_found_and_a_marked_table_is_let_be(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    root = _tree(
        tmp_path,
        {
            "big.py": "x = 1\n" * (MAX_MODULE_LINES + 1),
            "fns.py": f"def long():\n{body}\n\ndef table():  {TABLE_MARK} one row per metric\n{body}",
            "short.py": "def f():\n    return 1\n",
        },
    )
    assert long_modules(root) == [f"harness/big.py: {MAX_MODULE_LINES + 1} lines"]
    assert long_functions(root) == [f"harness/fns.py:1 long: {MAX_FUNCTION_LINES + 1} lines"]


def test_nine_parameters_are_found_outside_the_cli_only(tmp_path: Path) -> None:
    nine = "def f(a, b, c, d, e, *, g, h, i, j):\n    pass\n\n\nclass C:\n    def m(self, a, b, c, d, e, g, h, i):\n        pass\n"
    root = _tree(tmp_path, {"core.py": nine, "cli/opts.py": nine})
    assert long_signatures(root) == ["harness/core.py:1 f: 9 parameters"]


def test_an_inner_import_of_the_harness_is_counted_and_its_reason_read(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "a.py": (
                "def f():\n    from harness import b  # lazy: b imports a\n    import numpy\n    import json\n"
                "    from . import c\n"
            ),
            "cli/main.py": "def g():\n    from harness import a\n",
        },
    )
    own, heavy = inner_imports(root)
    assert own == ["harness/a.py:2 # lazy: b imports a", "harness/a.py:5 (no reason on its line)"]
    assert heavy == ["harness/a.py:3 (no reason on its line)"]


def test_the_loose_modules_are_those_beside_the_packages(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"__main__.py": "", "a.py": "", "b.py": "", "pkg/__init__.py": "", "pkg/c.py": ""})
    assert loose_modules(root) == ["a.py", "b.py"]
