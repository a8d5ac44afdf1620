"""Our deployment policy, checked on rendered manifests: every container
has resource requests and limits, runs unprivileged on a read-only root
with no capabilities under seccomp RuntimeDefault, and (outside Jobs) has
readiness and liveness probes; images are pinned; the shutdown and
migration settings of taskstore agree with the pod specs around them; and
an MCP gateway (`taskstore mcp`) serves MCP beyond its own pod."""

from __future__ import annotations

import re
from typing import Any, Iterator

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}
# Workloads that run to completion: probes do not apply.
RUN_TO_COMPLETION = {"Job", "CronJob"}
DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {}).get("spec", {})


def seconds(duration: str) -> float:
    match = DURATION.match(duration.strip())
    if not match:
        raise ValueError(f"not a duration: {duration!r}")
    value, unit = int(match.group(1)), match.group(2)
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def container_violations(kind: str, pod: dict[str, Any], container: dict[str, Any]) -> Iterator[str]:
    pod_security = pod.get("securityContext", {})
    security = container.get("securityContext", {})
    resources = container.get("resources", {})
    for section in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            if resource not in resources.get(section, {}):
                yield f"no {resource} {section[:-1]}"
    if security.get("allowPrivilegeEscalation") is not False:
        yield "allowPrivilegeEscalation is not false"
    if security.get("readOnlyRootFilesystem") is not True:
        yield "readOnlyRootFilesystem is not true"
    if "ALL" not in security.get("capabilities", {}).get("drop", []):
        yield "capabilities are not all dropped"
    if security.get("privileged"):
        yield "privileged"
    if security.get("capabilities", {}).get("add"):
        yield "adds capabilities"
    if not security.get("runAsNonRoot", pod_security.get("runAsNonRoot")):
        yield "runAsNonRoot is not true"
    seccomp = security.get("seccompProfile", pod_security.get("seccompProfile", {}))
    if seccomp.get("type") != "RuntimeDefault":
        yield "seccompProfile is not RuntimeDefault"
    image = container.get("image", "")
    name = image.rsplit("/", 1)[-1]
    if "@sha256:" not in image and (":" not in name or name.endswith(":latest")):
        yield f"image {image!r} is not pinned to a version"
    if kind not in RUN_TO_COMPLETION:
        for probe in ("readinessProbe", "livenessProbe"):
            if probe not in container:
                yield f"no {probe}"


def env_of(container: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> dict[str, str]:
    """The container's plain environment: its ConfigMap sources, then env."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef", {}).get("name")
        env.update(config_maps.get(ref, {}))
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
    return env


def grace_violations(pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]) -> Iterator[str]:
    """A process's own shutdown grace (plus any preStop pause) must end
    before Kubernetes kills it."""
    binary = " ".join(container.get("command", []) + container.get("args", []))
    variable = "TASKWORKER_SHUTDOWN_GRACE" if "taskworker" in binary else "TASKSTORE_SHUTDOWN_GRACE"
    grace = seconds(env.get(variable, "30s"))
    pause = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    allowed = pod.get("terminationGracePeriodSeconds", 30)
    if grace + pause >= allowed:
        yield (
            f"{variable} ({grace:g} s) plus the preStop pause ({pause} s) does not end "
            f"before terminationGracePeriodSeconds ({allowed} s)"
        )


def mcp_listen_violations(container: dict[str, Any], env: dict[str, str]) -> Iterator[str]:
    """`taskstore mcp` serves MCP on loopback unless told otherwise: in a
    pod, out of reach of its Service, its ingress and HTTP probes."""
    argv = container.get("command", []) + container.get("args", [])
    if "mcp" not in argv:
        return
    listen = env.get("TASKSTORE_MCP_LISTEN")
    for i, arg in enumerate(argv):
        if arg == "--mcp-listen" and i + 1 < len(argv):
            listen = argv[i + 1]
        elif arg.startswith("--mcp-listen="):
            listen = arg.split("=", 1)[1]
    if listen is None:
        yield "TASKSTORE_MCP_LISTEN is not set: the gateway would serve MCP on loopback only"
    elif listen.strip().lower() == "off":
        yield "TASKSTORE_MCP_LISTEN is off: the gateway would serve no MCP"
    else:
        host = listen.rsplit(":", 1)[0].strip("[]").lower()
        if host == "localhost" or host == "::1" or host.startswith("127."):
            yield f"TASKSTORE_MCP_LISTEN ({listen}) is loopback: nothing outside the pod reaches MCP"


def is_ours(container: dict[str, Any]) -> bool:
    return "mcp-taskstore" in container.get("image", "")


def violations(docs: list[dict[str, Any]], allow_open: bool = False) -> list[str]:
    """Every violation of the policy in one rendered set of manifests;
    `allow_open` for the dev overlay, the one place authentication may be
    off."""
    found: list[str] = []
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    scaled = {
        d.get("spec", {}).get("scaleTargetRef", {}).get("name")
        for d in docs
        if d["kind"] in {"HorizontalPodAutoscaler", "ScaledObject"}
    }
    migrated_by_job = any(
        d["kind"] == "Job" and any("migrate" in c.get("args", []) for c in pod_spec(d).get("containers", []))
        for d in docs
    )
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        pod = pod_spec(doc)
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] in scaled and "replicas" in doc["spec"]:
            found.append(f"{where}: sets replicas, which its autoscaler owns")
        for container in pod.get("initContainers", []) + pod.get("containers", []):
            at = f"{where} container {container['name']}"
            found += [f"{at}: {v}" for v in container_violations(doc["kind"], pod, container)]
            if not is_ours(container) or doc["kind"] in RUN_TO_COMPLETION:
                continue
            env = env_of(container, config_maps)
            found += [f"{at}: {v}" for v in grace_violations(pod, container, env)]
            found += [f"{at}: {v}" for v in mcp_listen_violations(container, env)]
            is_service = "taskworker" not in " ".join(container.get("command", []))
            if migrated_by_job and is_service and env.get("TASKSTORE_MIGRATIONS") != "await":
                found.append(f"{at}: a migrations Job runs, so TASKSTORE_MIGRATIONS must be await")
            if is_service and not env.get("TASKSTORE_AUTH"):
                found.append(f"{at}: TASKSTORE_AUTH is not set (serve refuses to start)")
            if is_service and env.get("TASKSTORE_AUTH") == "none" and not allow_open:
                found.append(f"{at}: TASKSTORE_AUTH is none outside the dev overlay")
    return found
