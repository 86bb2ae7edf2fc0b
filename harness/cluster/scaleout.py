"""One Miles run over several GPU hosts: what each host starts, and the job submitted to them (pure).

Miles is a Ray program: over two Sparks, it needs one Ray cluster of its own
spanning both, inside the lab image, so that its actor and rollout engines
can be placed on either GPU and NCCL can link them over the fast port. The
plan (docs/scale-out.md):

- host 1 starts a lab container running a Ray head, host 2.. a lab container
  running a Ray worker that joins it; both with host networking (NCCL and
  Ray must see the hosts' real interfaces), the RoCE devices, locked memory
  without limit, and the NCCL environment of the link;
- the Miles job is submitted to that head with Ray's job API, its submission
  id the run id and the manifest's facts as its metadata;
- its log is followed with the job API into the run's capture like any run;
- the heat guard pauses every container of the run together, or none.

`plan_scale_out` decides all of it from the launch spec and the hosts; the
dry run prints it. Ports differ from Ray's defaults: the harness's own Ray
cluster already holds those on the same hosts.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional, Sequence

from harness.cluster.connect import NodeFacts
from harness.engines.spec import LaunchSpec
from harness.lab import entry as lab_entry
from harness.lab.milesargv import apply_overrides, flag_values
from harness.lab.milesnames import (
    ACTOR_NUM_GPUS_PER_NODE_FLAG,
    ACTOR_NUM_NODES_FLAG,
    COLOCATE_FLAG,
    ROLLOUT_NUM_GPUS_FLAG,
)
from harness.secrets import redact_text

GCS_PORT = 6380
DASHBOARD_PORT = 8266
# Every port a second Ray on the same host would otherwise take from the first one.
RAY_PORTS = {
    "--port": GCS_PORT,
    "--dashboard-port": DASHBOARD_PORT,
    "--ray-client-server-port": 10002,
    "--dashboard-agent-listen-port": 52366,
    "--dashboard-agent-grpc-port": 52367,
    "--runtime-env-agent-port": 52368,
    "--metrics-export-port": 52369,
    "--node-manager-port": 52370,
    "--object-manager-port": 52371,
    "--min-worker-port": 21000,
    "--max-worker-port": 21999,
}
# What a GB10 pair linked by its ConnectX-7 port needs, beside the interface names (cluster.env):
# RoCE through the IB verbs, NCCL's errors surfaced, and collectives that fail rather than hang.
NCCL_DEFAULTS = {
    "NCCL_IB_DISABLE": "0",
    "NCCL_IB_GID_INDEX": "3",  # RoCE v2 over IPv4, the usual GID on a ConnectX port
    "NCCL_DEBUG": "WARN",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
}
# The interface names differ by host set-up: the plan says when they are not given.
NCCL_LINK_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA")
ROLE_LABEL = "org.miles-gb10-lab.ray-role"


@dataclass(frozen=True)
class HostLaunch:
    """What one host starts: a lab container running a Ray head or worker."""

    host: NodeFacts
    role: str  # "head" or "worker"
    container_name: str
    argv: tuple[str, ...]  # `docker run ...`, secrets by name only

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host.to_dict(),
            "role": self.role,
            "container_name": self.container_name,
            "argv": list(self.argv),
        }


@dataclass(frozen=True)
class JobSubmission:
    """The Miles job as Ray's job API takes it (JobSubmissionClient(address).submit_job(...))."""

    address: str
    submission_id: str
    entrypoint: str
    metadata: Mapping[str, str]
    runtime_env: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScaleOutPlan:
    """One run over several hosts."""

    run: str
    run_id: str
    hosts: tuple[HostLaunch, ...]
    job: JobSubmission
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "run_id": self.run_id,
            "nodes": len(self.hosts),
            "hosts": [host.to_dict() for host in self.hosts],
            "job": self.job.to_dict(),
            "warnings": list(self.warnings),
        }


def plan_scale_out(
    spec: LaunchSpec, hosts: Sequence[NodeFacts], *, cluster_env: Mapping[str, str], metadata: Mapping[str, Any]
) -> ScaleOutPlan:
    """The containers each host starts and the job submitted to them (pure; the first host is the head)."""
    if len(hosts) < 2:
        raise ValueError("a run over several hosts needs at least two")
    head = hosts[0]
    nccl = {**NCCL_DEFAULTS, **cluster_env}
    warnings = tuple(
        f"{name} is not set in cluster.env: NCCL and Gloo pick an interface themselves, maybe not the fast port"
        for name in NCCL_LINK_ENV[:2]
        if name not in nccl
    )
    launches = []
    for index, host in enumerate(hosts):
        role = "head" if index == 0 else "worker"
        name = f"{spec.container_name}-{role}" + ("" if index < 2 else str(index))
        ray_start = ["start", "--block", "--node-ip-address", host.node_ip, "--num-gpus", "1", "--disable-usage-stats"]
        if role == "head":
            ray_start += ["--head", "--dashboard-host", "0.0.0.0", "--include-dashboard", "true"]
        else:
            ray_start += ["--address", f"{head.node_ip}:{GCS_PORT}"]
        for flag, port in RAY_PORTS.items():
            if role == "worker" and flag in ("--port", "--dashboard-port", "--ray-client-server-port"):
                continue  # the head's alone
            ray_start += [flag, str(port)]
        launches.append(HostLaunch(host, role, name, tuple(_docker_run(spec, name, role, nccl, ray_start))))
    words = _trainer_words(spec, len(hosts))
    env_vars = {
        **{k: v for k, v in spec.display_env().items() if k not in ("MILES_ARGS", "MILES_EXTRA_ARGS")},
        **lab_entry.job_env({}),
        **nccl,
    }
    job = JobSubmission(
        address=f"http://{head.node_ip}:{DASHBOARD_PORT}",
        submission_id=spec.run_id,
        entrypoint=shlex.join(["python3", "train.py", *words]),
        metadata={key: str(value) for key, value in metadata.items() if value is not None},
        runtime_env={"env_vars": env_vars},
    )
    return ScaleOutPlan(spec.run, spec.run_id, tuple(launches), job, warnings)


def _trainer_words(spec: LaunchSpec, nodes: int) -> list[str]:
    """The run's trainer flags with the actor and the rollout spread over every host (one GPU each)."""
    words = list(spec.trainer_argv[2:])  # after `python3 train.py`
    values = flag_values(words)
    overrides: dict[str, Any] = {ACTOR_NUM_NODES_FLAG: nodes, ACTOR_NUM_GPUS_PER_NODE_FLAG: 1}
    if COLOCATE_FLAG in values or ROLLOUT_NUM_GPUS_FLAG in values:
        overrides[ROLLOUT_NUM_GPUS_FLAG] = nodes  # colocated: the engines share the actor's GPUs on every host
    return apply_overrides(words, overrides)


def _docker_run(spec: LaunchSpec, name: str, role: str, nccl: Mapping[str, str], ray_start: list[str]) -> list[str]:
    argv = [
        "docker",
        "run",
        "--detach",
        "--name",
        name,
        "--network",
        "host",
        "--ipc",
        "host",
        "--gpus",
        "all",
        "--shm-size",
        spec.shm_size,
        "--ulimit",
        "memlock=-1",
        "--ulimit",
        "stack=67108864",
        "--device",
        "/dev/infiniband",
        "--cap-add",
        "IPC_LOCK",
        *(["--init"] if spec.init else []),
    ]
    for mount in spec.mounts:
        argv += ["-v", f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"]
    for key, value in {**lab_entry.job_env({}), **nccl}.items():
        argv += ["-e", f"{key}={value}"]
    for key in spec.secret_env:
        argv += ["-e", key]  # by name: its value comes from the host's environment, never the command line
    for key, value in {**spec.labels, ROLE_LABEL: role}.items():
        argv += ["--label", f"{key}={value}"]
    return [*argv, "--entrypoint", "ray", spec.image, *ray_start]


def describe_plan(plan: ScaleOutPlan, secret_values: Sequence[str] = ()) -> list[str]:
    """The plan as lines to print: each host's container, then the job, its log and its guard."""
    lines = [f"run {plan.run}   run id {plan.run_id}   over {len(plan.hosts)} hosts   (dry run: nothing started)"]
    for launch in plan.hosts:
        lines.append(f"host {launch.host.name}: Ray {launch.role} in container {launch.container_name}")
        lines.append("  " + redact_text(shlex.join(launch.argv), list(secret_values)))
    job = plan.job
    lines.append(
        f"job: submitted to {job.address} once {len(plan.hosts)} nodes have joined (JobSubmissionClient.submit_job)"
    )
    lines.append(f"  submission id  {job.submission_id}")
    lines.append(f"  entrypoint     {job.entrypoint}")
    lines.append("  metadata       " + ", ".join(f"{k}={v}" for k, v in job.metadata.items()))
    lines.append("  env            " + " ".join(f"{k}={v}" for k, v in job.runtime_env["env_vars"].items()))
    lines.append(f"log: tail_job_logs({job.submission_id!r}) on the head, each line stamped into container.log")
    lines.append(
        f"guard: each host's sensor; when any host is hot, all {len(plan.hosts)} containers are paused "
        "together (or none), resumed together (docs/scale-out.md)"
    )
    lines += [f"warning: {warning}" for warning in plan.warnings]
    return lines


def pick_hosts(nodes: Sequence[Any], count: int, address: str) -> list[NodeFacts]:
    """The first `count` nodes that can take a run, or a ValueError saying how many there are."""
    if len(nodes) < count:
        raise ValueError(
            f"the Ray cluster at {address} offers {len(nodes)} node(s) a run can take (one "
            f"GPU each); --nodes {count} needs {count}"
        )
    return [node.facts for node in nodes[:count]]


def metadata_for(spec: LaunchSpec, provenance: Mapping[str, Any], nodes: int, *, hosts: Optional[list] = None) -> dict:
    """The manifest facts the job carries as metadata (strings, as Ray's job API wants)."""
    return {
        "run": spec.run,
        "run_id": spec.run_id,
        "experiment": spec.experiment,
        "seed": spec.seed,
        "image": spec.image,
        "nodes": nodes,
        "git_sha": provenance.get("git_sha"),
        "git_dirty": provenance.get("git_dirty"),
        "harness_version": provenance.get("harness_version"),
        "capture_dir": spec.capture_dir,
        **({"hosts": ",".join(h.hostname for h in hosts)} if hosts else {}),
    }
