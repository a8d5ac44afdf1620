"""Our deployment policy, checked on rendered manifests: every container
has resource requests and limits, runs unprivileged on a read-only root
with no capabilities under seccomp RuntimeDefault, and (outside Jobs) has
readiness and liveness probes; images are pinned; the shutdown and
migration settings of taskstore agree with the pod specs around them; an
MCP gateway (`taskstore mcp`) serves MCP beyond its own pod; a worker
(taskworker, or `mcp-taskstore-worker` in Python or TypeScript) is its
container's process, serves the endpoint its HTTP probes ask, and drains
before it is killed; every selector (Deployments, Services, PDBs,
NetworkPolicies, PodMonitors) selects pods of the rendering; and every
autoscaler scales a Deployment there, KEDA's RabbitMQ triggers reading a
variable it sets and naming tool queues of the service's prefix (for
taskworker, exactly the tools it serves)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Iterator

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}
AUTOSCALERS = {"HorizontalPodAutoscaler", "ScaledObject"}
# The worker programs: Rust, and the Python and TypeScript packages'.
WORKER_PROGRAMS = {"taskworker", "mcp-taskstore-worker"}
# They run the worker as a child and do not pass SIGTERM on: no drain.
LAUNCHERS = {"npx", "npm", "pnpm", "yarn", "corepack"}
SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
# Workloads that run to completion: probes do not apply.
RUN_TO_COMPLETION = {"Job", "CronJob"}
DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")
# The tools a backlog query names (`taskstore_dispatch_waiting{tool=~"a|b"}`).
BACKLOG_TOOLS = re.compile(r'taskstore_dispatch_waiting\{tool=~"([^"]*)"\}')


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


def argv_of(container: dict[str, Any]) -> list[str]:
    return container.get("command", []) + container.get("args", [])


def program(word: str) -> str:
    return PurePosixPath(word).name


def is_worker(container: dict[str, Any]) -> bool:
    """taskworker, or the Python or TypeScript `mcp-taskstore-worker`,
    however started (a shell's script included)."""
    return any(program(word) in WORKER_PROGRAMS for arg in argv_of(container) for word in arg.split())


def flag_or_env(argv: list[str], flag: str, env: dict[str, str], variable: str) -> str | None:
    """What a flag is given, else its variable (as the programs read them)."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return env.get(variable) or None


def is_loopback(listen: str) -> bool:
    host = listen.rsplit(":", 1)[0].strip("[]").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


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
    variable = "TASKWORKER_SHUTDOWN_GRACE" if is_worker(container) else "TASKSTORE_SHUTDOWN_GRACE"
    grace = seconds(flag_or_env(argv_of(container), "--shutdown-grace", env, variable) or "30s")
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
    elif is_loopback(listen):
        yield f"TASKSTORE_MCP_LISTEN ({listen}) is loopback: nothing outside the pod reaches MCP"


def launcher_violations(container: dict[str, Any]) -> Iterator[str]:
    """A worker drains on SIGTERM only if it gets it: it must be the
    container's process (PID 1), not the child of npm or of a shell."""
    argv = argv_of(container)
    if not argv:
        return
    first = program(argv[0])
    if first in LAUNCHERS:
        yield (
            f"the worker is started through {first}, which does not pass SIGTERM on: run it as "
            "`node node_modules/.bin/mcp-taskstore-worker ...`"
        )
    elif first in SHELLS and "-c" in argv:
        script = argv[argv.index("-c") + 1] if argv.index("-c") + 1 < len(argv) else ""
        if not script.lstrip().startswith("exec "):
            yield f"a shell runs the worker as its child, which does not get SIGTERM: `exec` it ({script!r})"


def probe_port(container: dict[str, Any], port: Any) -> Any:
    """A probe's port as a number, when the container names it."""
    if isinstance(port, int):
        return port
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return declared.get("containerPort")
    return port


def worker_endpoint_violations(container: dict[str, Any], env: dict[str, str]) -> Iterator[str]:
    """A worker's HTTP probes ask its metrics endpoint (/readyz, /livez),
    which is off unless TASKWORKER_METRICS_LISTEN (--metrics-listen) opens
    it beyond loopback, on the port the probes ask."""
    probes = [
        container[p] for p in ("startupProbe", "readinessProbe", "livenessProbe") if "httpGet" in container.get(p, {})
    ]
    if not probes:
        return
    listen = flag_or_env(argv_of(container), "--metrics-listen", env, "TASKWORKER_METRICS_LISTEN")
    if listen is None:
        yield "TASKWORKER_METRICS_LISTEN is not set: nothing answers the worker's HTTP probes"
        return
    if is_loopback(listen):
        yield f"TASKWORKER_METRICS_LISTEN ({listen}) is loopback: the kubelet's HTTP probes cannot reach it"
    listening = listen.rsplit(":", 1)[-1]
    asked = {str(probe_port(container, probe["httpGet"].get("port"))) for probe in probes}
    for port in sorted(asked - {listening}):
        yield f"a probe asks port {port}, but TASKWORKER_METRICS_LISTEN ({listen}) listens on {listening}"


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def selector_violations(docs: list[dict[str, Any]]) -> Iterator[str]:
    """Selectors that select nothing fail silently in a cluster: a policy
    that isolates no pod, a budget that protects none, a Service with no
    endpoints. (Selectors with matchExpressions are not judged.)"""
    templates = [pod_template_labels(d) for d in docs if d["kind"] in WORKLOADS]
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        spec = doc.get("spec", {})
        if doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet"}:
            selector = spec.get("selector", {})
            if not selector.get("matchExpressions") and not selects(selector, pod_template_labels(doc)):
                yield f"{where}: its selector does not match its own pod template's labels"
            continue
        if doc["kind"] == "NetworkPolicy":
            selector = spec.get("podSelector", {})
        elif doc["kind"] in {"PodDisruptionBudget", "PodMonitor"}:
            selector = spec.get("selector", {})
        elif doc["kind"] == "Service" and spec.get("selector"):
            selector = {"matchLabels": spec["selector"]}
        else:
            continue
        if selector.get("matchExpressions") or not selector.get("matchLabels"):
            continue
        if not any(selects(selector, labels) for labels in templates):
            yield f"{where}: selects no pod of this rendering ({selector['matchLabels']})"


def pod_template_labels(doc: dict[str, Any]) -> dict[str, str]:
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {}).get("metadata", {}).get("labels", {})


def env_names(container: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> set[str] | None:
    """The variables a container is given; None when a Secret's keys (not
    in the rendering) may add some."""
    names = {var["name"] for var in container.get("env", [])}
    for source in container.get("envFrom", []):
        if "secretRef" in source:
            return None
        names |= set(config_maps.get(source.get("configMapRef", {}).get("name"), {}))
    return names


def autoscaler_violations(docs: list[dict[str, Any]], config_maps: dict[str, dict[str, str]]) -> Iterator[str]:
    """Each autoscaler scales a Deployment of the rendering. KEDA's RabbitMQ
    triggers read the broker URL from a variable of that Deployment's
    containers and watch tool queues (<prefix>.tool.<tool>) of the
    service's prefix; for taskworker, one per tool it serves and no other."""
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    prefix = config_maps.get("taskstore", {}).get("TASKSTORE_QUEUE_PREFIX", "taskstore")
    for doc in docs:
        if doc["kind"] not in AUTOSCALERS:
            continue
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        ref = doc.get("spec", {}).get("scaleTargetRef", {})
        target = deployments.get(ref.get("name")) if ref.get("kind", "Deployment") == "Deployment" else None
        if target is None:
            yield f"{where}: scales {ref.get('kind', 'Deployment')}/{ref.get('name')}, which this rendering does not have"
            continue
        if doc["kind"] != "ScaledObject":
            continue
        containers = pod_spec(target).get("containers", [])
        names: set[str] | None = set()
        for container in containers:
            given = env_names(container, config_maps)
            names = None if names is None or given is None else names | given
        queues = []
        backlogs: list[set[str]] = []
        for i, trigger in enumerate(doc["spec"].get("triggers", [])):
            if trigger.get("type") == "prometheus":
                named = BACKLOG_TOOLS.search(trigger.get("metadata", {}).get("query", ""))
                if named:
                    backlogs.append({t for t in named.group(1).split("|") if t})
            if trigger.get("type") != "rabbitmq":
                continue
            meta = trigger.get("metadata", {})
            variable = meta.get("hostFromEnv")
            if variable and names is not None and variable not in names:
                yield (
                    f"{where}: trigger {i} reads hostFromEnv {variable}, which no container of "
                    f"Deployment/{target['metadata']['name']} sets"
                )
            queue = meta.get("queueName", "")
            if not queue.startswith(f"{prefix}.tool.") or queue == f"{prefix}.tool.":
                yield (
                    f"{where}: trigger {i} watches {queue!r}, not a tool queue of the service's prefix "
                    f"({prefix}.tool.<tool>)"
                )
            else:
                queues.append(queue[len(f"{prefix}.tool.") :])
        for container in containers:
            if not any(program(word) == "taskworker" for word in argv_of(container)):
                continue
            env = env_of(container, config_maps)
            served = {t.strip() for t in env.get("TASKWORKER_TOOLS", "").split(",") if t.strip()}
            for tool in sorted(served - set(queues)):
                yield f"{where}: no trigger watches the queue of {tool}, which taskworker serves"
            for backlog in backlogs:
                for tool in sorted(served - backlog):
                    yield f"{where}: the backlog query leaves out {tool}, which taskworker serves"
                if "TASKWORKER_COMMAND_TOOLS" not in env:
                    for tool in sorted(backlog - served):
                        yield f"{where}: the backlog query counts {tool}, which taskworker does not serve"
            if "TASKWORKER_COMMAND_TOOLS" not in env:
                for tool in sorted(set(queues) - served):
                    yield f"{where}: a trigger watches the queue of {tool}, which taskworker does not serve"


def is_ours(container: dict[str, Any]) -> bool:
    return "mcp-taskstore" in container.get("image", "")


def violations(docs: list[dict[str, Any]], allow_open: bool = False) -> list[str]:
    """Every violation of the policy in one rendered set of manifests;
    `allow_open` for the dev overlay, the one place authentication may be
    off."""
    found: list[str] = []
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    scaled = {d.get("spec", {}).get("scaleTargetRef", {}).get("name") for d in docs if d["kind"] in AUTOSCALERS}
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
            if doc["kind"] in RUN_TO_COMPLETION:
                continue
            env = env_of(container, config_maps)
            if is_worker(container):
                found += [f"{at}: {v}" for v in grace_violations(pod, container, env)]
                found += [f"{at}: {v}" for v in launcher_violations(container)]
                found += [f"{at}: {v}" for v in worker_endpoint_violations(container, env)]
                continue
            if not is_ours(container):
                continue
            found += [f"{at}: {v}" for v in grace_violations(pod, container, env)]
            found += [f"{at}: {v}" for v in mcp_listen_violations(container, env)]
            # The service, the gateway: `taskstore serve`, `taskstore mcp`.
            if migrated_by_job and env.get("TASKSTORE_MIGRATIONS") != "await":
                found.append(f"{at}: a migrations Job runs, so TASKSTORE_MIGRATIONS must be await")
            if not env.get("TASKSTORE_AUTH"):
                found.append(f"{at}: TASKSTORE_AUTH is not set (serve refuses to start)")
            if env.get("TASKSTORE_AUTH") == "none" and not allow_open:
                found.append(f"{at}: TASKSTORE_AUTH is none outside the dev overlay")
    found += selector_violations(docs)
    found += autoscaler_violations(docs, config_maps)
    return found
