"""`python3 -m harness.sim [Miles flags] [--time-scale X]`: the simulated Miles trainer."""

import sys

from harness.sim.cli import main

sys.exit(main())
