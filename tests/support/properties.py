"""How hard the property tests search: the full suite searches as each test asks; the fast tier a tenth of it.

Two Hypothesis profiles, registered in conftest.py: `full` (the default) and
`fast` (`make test-fast` passes `--hypothesis-profile=fast`). Neither has a
deadline: a loaded machine makes an example slow, never wrong. A test that
asks for more examples than Hypothesis's default says so with `examples(n)`,
which the fast profile scales down like the default.
"""

from __future__ import annotations

from hypothesis import settings

FULL_EXAMPLES = 100  # Hypothesis's own default
FAST_EXAMPLES = 10

settings.register_profile("full", max_examples=FULL_EXAMPLES, deadline=None)
settings.register_profile("fast", max_examples=FAST_EXAMPLES, deadline=None)


def examples(full: int) -> int:
    """`full` examples in the full suite; as many fewer in the loaded profile as it has fewer than the default."""
    return max(1, full * settings.default.max_examples // FULL_EXAMPLES)
