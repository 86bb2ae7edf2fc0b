"""The prose of a Markdown page: its paragraphs outside code blocks, tables and headings, and their sentences."""

from __future__ import annotations

import re

# A sentence ends at . ! or ? before a space and a capital, a digit, a code span, a bracket or emphasis; not after an e.g.
SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<=[.!?])\s+(?=[A-Z0-9`(\[*\"])")


def prose_paragraphs(text: str) -> list[list[str]]:
    """Runs of prose lines (not code, tables or headings), a list item starting a new one."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        prose = line.strip() and not line.startswith(("    ", "|", "#", "<!--"))
        if not prose or line.startswith("- "):
            if current:
                paragraphs.append(current)
            current = [line] if prose else []
            continue
        current.append(line)
    return paragraphs + ([current] if current else [])


def sentences(text: str) -> list[str]:
    """Every sentence of the page's prose, a sentence never running from one paragraph into the next."""
    found = []
    for paragraph in prose_paragraphs(text):
        found += SENTENCE_END.split(" ".join(line.strip() for line in paragraph))
    return found


def long_sentences(text: str, most_words: int) -> list[str]:
    return [sentence for sentence in sentences(text) if len(sentence.split()) > most_words]
