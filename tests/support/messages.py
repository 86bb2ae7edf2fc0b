"""Reading what the harness says as whole messages, however the one renderer fitted them to the width."""

from __future__ import annotations

from harness.cli.messages import whole_message


def messages(text: str) -> list[str]:
    """The messages in a stream (stderr, say): a line that starts at the margin begins one, indented lines
    continue it; each comes back whole, as the harness said it."""
    grouped: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith(" ") and grouped:
            grouped[-1].append(line)
        else:
            grouped.append([line])
    return [whole_message(lines) for lines in grouped]
