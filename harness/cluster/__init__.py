"""Runs placed by Ray over several GPU hosts (docs/cluster.md, docs/scale-out.md).

`--ray ADDRESS` on `run` and `sweep` makes each run one Ray task asking for
one GPU (and the experiment's `cluster.resources`), so Ray places at most one
run per GB10 and queues the rest. The task runs the harness's own runner on
its node (that host's engine, guard and NVML), keeps the host's own copy of
the capture, and streams every write back; the driver applies them to its
capture with the same writer a local run uses (harness.capture.writer).

    connect     ray.init, the nodes that can take a run, the one-line install hint
    node        what runs on a node: the run's task, the pre-flight check, the engines' listing and levers
    driver      the sweep on the driver: decide under the capture lock, submit, apply the stream, a lost node
    remote      the engines of every node as engines here, so `harness recover --ray` is the local recover
    board       one line per run (host, step, pause state) for live progress
    scaleout    one Miles run over several hosts: what each host would start (pure)

Ray is an optional extra (`pip install '.[cluster]'`) and is imported only
when `--ray` is used.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ExitCode, HarnessError

INSTALL_HINT = "pip install '.[cluster]'"


def import_ray() -> Any:
    """The `ray` module, or a one-line error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise HarnessError(
            f"--ray needs Ray, which is not installed here: {INSTALL_HINT} in the project (or pip install 'ray>=2.9')",
            ExitCode.BAD_INPUT,
        ) from None
    return ray
