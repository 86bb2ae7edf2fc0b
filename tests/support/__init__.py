"""What the tests share; nothing here is a test.

- timing: `eventually`, `wait_until` and `scaled`, every wait stretched by HARNESS_TEST_SLOWDOWN;
- machine: what this machine has (a Docker engine, a GPU, commands on PATH);
- images: the Docker tests' images (fixtures);
- lab: a throwaway lab for run tests on either engine (fixtures `lab`, `docker_lab`, `process_lab`);
- drills: heat guard drills (a sensor file, a ticking run);
- guard: the guard's process-group stand-in (fixture `ticker`) and `harness guard` in a subprocess;
- fakes: clocks set by hand;
- clones: a fresh clone of the checkout and `make` in it (fixture `clone`, of `checkout_files`);
- experiment_files: experiment files written by tests and the one-line error they must give (fixture `exp_dir`);
- commands: the harness's click command built once a process for every in-process CliRunner call (autouse);
- summaries: a capture made from a Miles log, summarized;
- seedcaptures: hand-made captures of several seeds per condition, and the seeds a t-test needs;
- cuts: where a power loss may cut a file of lines (every line's edges, a Hypothesis strategy for the rest);
- order: the longest test modules start first (a plugin, registered in conftest.py).

The fixtures are registered in conftest.py (`pytest_plugins`); a test module
imports the helpers it calls, never another test module.
"""
