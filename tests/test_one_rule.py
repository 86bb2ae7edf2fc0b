"""One rule, one place: the step rows say each thing once."""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"


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
    notes = [text for text in string_templates(HARNESS / "summary" / "rows.py") if "{steps}" in text]
    repeated = sorted({text for text in notes if notes.count(text) > 1})
    assert len(notes) > 20 and repeated == []
