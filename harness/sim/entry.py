"""The sim image's entry: the lab image's protocol, with the simulator where Ray and train.py would be.

    python3 -m harness.sim.entry [more trainer flags]

The trainer's argv is built exactly as the lab image's entry builds it
(harness/lab/entry.py): MILES_ARGS, or the base run of
harness/lab/base-run.args when it is unset, then MILES_EXTRA_ARGS, then
the entry's own arguments; both variables are split like a shell splits
words and never evaluated. The simulator runs in this process in place of
`ray job submit ... -- python3 train.py` (it prints Ray's job lines itself),
so its exit code and its handling of SIGTERM are the container's.
HARNESS_SIM_TIME_SCALE sets its time scale. No data is checked: the
simulator reads no model and no data set.

Standard library only, like the rest of harness.sim and harness.lab.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping, Optional, Sequence

from harness.lab.entry import EntryError, trainer_words
from harness.sim.cli import main as simulate


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
    """Build the trainer's argv as the lab image does, and run the simulator on it; its exit code."""
    env = os.environ if env is None else env
    argv = sys.argv[1:] if argv is None else argv
    try:
        words = trainer_words(env, argv)
    except EntryError as err:
        print(err, file=sys.stderr)
        return err.exit_code
    return simulate(words, env)


if __name__ == "__main__":
    sys.exit(main())
