"""The policy fails what it should: a compliant workload passes, and each
way of breaking it is named."""

import copy
import unittest

from policy import violations

CONFIG = {
    "kind": "ConfigMap",
    "metadata": {"name": "taskstore"},
    "data": {
        "TASKSTORE_SHUTDOWN_GRACE": "30s",
        "TASKSTORE_MIGRATIONS": "await",
        "TASKSTORE_AUTH": "api-keys",
    },
}

GOOD = {
    "kind": "Deployment",
    "metadata": {"name": "taskstore"},
    "spec": {
        "template": {
            "spec": {
                "terminationGracePeriodSeconds": 45,
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "taskstore",
                        "image": "registry.example.com/mcp-taskstore:0.1.0",
                        "args": ["serve"],
                        "envFrom": [{"configMapRef": {"name": "taskstore"}}],
                        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                        "readinessProbe": {"grpc": {"port": 50051}},
                        "livenessProbe": {"grpc": {"port": 50051}},
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"cpu": "1", "memory": "512Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            }
        }
    },
}

MIGRATE_JOB = {
    "kind": "Job",
    "metadata": {"name": "taskstore-migrate"},
    "spec": {"template": {"spec": copy.deepcopy(GOOD["spec"]["template"]["spec"])}},
}
MIGRATE_JOB["spec"]["template"]["spec"]["containers"][0]["args"] = ["migrate"]
for probe in ("readinessProbe", "livenessProbe"):
    del MIGRATE_JOB["spec"]["template"]["spec"]["containers"][0][probe]


def broken(change):
    doc = copy.deepcopy(GOOD)
    change(doc["spec"]["template"]["spec"], doc["spec"]["template"]["spec"]["containers"][0])
    return doc


class PolicyTest(unittest.TestCase):
    def assert_violation(self, docs, expected):
        found = violations(docs)
        self.assertTrue(any(expected in v for v in found), f"{expected!r} not in {found}")

    def test_a_compliant_deployment_and_job_pass(self):
        self.assertEqual(violations([CONFIG, GOOD, MIGRATE_JOB]), [])

    def test_each_breach_is_named(self):
        cases = {
            "no memory limit": lambda pod, c: c["resources"]["limits"].pop("memory"),
            "no cpu request": lambda pod, c: c["resources"]["requests"].pop("cpu"),
            "no readinessProbe": lambda pod, c: c.pop("readinessProbe"),
            "no livenessProbe": lambda pod, c: c.pop("livenessProbe"),
            "allowPrivilegeEscalation is not false": lambda pod, c: c["securityContext"].pop(
                "allowPrivilegeEscalation"
            ),
            "readOnlyRootFilesystem is not true": lambda pod, c: c["securityContext"].update(
                readOnlyRootFilesystem=False
            ),
            "capabilities are not all dropped": lambda pod, c: c["securityContext"].pop("capabilities"),
            "runAsNonRoot is not true": lambda pod, c: pod["securityContext"].pop("runAsNonRoot"),
            "seccompProfile is not RuntimeDefault": lambda pod, c: pod["securityContext"].update(
                seccompProfile={"type": "Unconfined"}
            ),
            "is not pinned": lambda pod, c: c.update(image="registry.example.com/mcp-taskstore:latest"),
            "does not end before terminationGracePeriodSeconds": lambda pod, c: pod.update(
                terminationGracePeriodSeconds=30
            ),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation([CONFIG, broken(change)], expected)

    def test_a_job_needs_no_probes_but_everything_else(self):
        job = copy.deepcopy(MIGRATE_JOB)
        self.assertEqual(violations([job]), [])
        job["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
        self.assert_violation([job], "no cpu limit")

    def test_services_await_the_migrations_job(self):
        config = copy.deepcopy(CONFIG)
        config["data"]["TASKSTORE_MIGRATIONS"] = "apply"
        self.assert_violation([config, GOOD, MIGRATE_JOB], "TASKSTORE_MIGRATIONS must be await")

    def test_the_service_authenticates_except_in_dev(self):
        config = copy.deepcopy(CONFIG)
        config["data"]["TASKSTORE_AUTH"] = "none"
        self.assert_violation([config, GOOD], "TASKSTORE_AUTH is none outside the dev overlay")
        self.assertEqual(violations([config, GOOD], allow_open=True), [])
        del config["data"]["TASKSTORE_AUTH"]
        self.assert_violation([config, GOOD], "TASKSTORE_AUTH is not set")

    def test_an_autoscaled_deployment_sets_no_replicas(self):
        doc = copy.deepcopy(GOOD)
        doc["spec"]["replicas"] = 2
        hpa = {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"}, "spec": {"scaleTargetRef": {"name": "taskstore"}}}
        self.assert_violation([CONFIG, doc, hpa], "sets replicas")

    def test_the_mcp_gateway_listens_beyond_its_pod(self):
        gateway = copy.deepcopy(GOOD)
        container = gateway["spec"]["template"]["spec"]["containers"][0]
        container["args"] = ["mcp"]
        container["env"] = [{"name": "TASKSTORE_MCP_LISTEN", "value": "0.0.0.0:8080"}]
        self.assertEqual(violations([CONFIG, gateway]), [])
        container["args"] = ["mcp", "--mcp-listen", "[::]:8080"]
        self.assertEqual(violations([CONFIG, gateway]), [])
        container["args"] = ["mcp"]
        cases = {
            "is not set": [],
            "is loopback": [{"name": "TASKSTORE_MCP_LISTEN", "value": "127.0.0.1:8080"}],
            "is off": [{"name": "TASKSTORE_MCP_LISTEN", "value": "off"}],
        }
        for expected, env in cases.items():
            with self.subTest(expected):
                container["env"] = env
                self.assert_violation([CONFIG, gateway], expected)
        # serve has MCP off unless asked: nothing to say.
        self.assertEqual(violations([CONFIG, GOOD]), [])


WORKER_CONFIG = {
    "kind": "ConfigMap",
    "metadata": {"name": "python-worker"},
    "data": {"TASKWORKER_METRICS_LISTEN": "0.0.0.0:9090", "TASKWORKER_SHUTDOWN_GRACE": "75s"},
}
WORKER_LABELS = {"app.kubernetes.io/name": "python-worker", "app.kubernetes.io/component": "worker"}
WORKER = copy.deepcopy(GOOD)
WORKER["metadata"]["name"] = "python-worker"
WORKER["spec"]["selector"] = {"matchLabels": dict(WORKER_LABELS)}
WORKER["spec"]["template"]["metadata"] = {"labels": dict(WORKER_LABELS)}
WORKER["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 90
WORKER_CONTAINER = WORKER["spec"]["template"]["spec"]["containers"][0]
WORKER_CONTAINER.pop("lifecycle")
WORKER_CONTAINER.update(
    image="registry.example.com/report-tools:1.4.2",
    command=["mcp-taskstore-worker"],
    args=["reports:tools"],
    envFrom=[{"configMapRef": {"name": "python-worker"}}],
    env=[{"name": "TASKWORKER_AMQP_URL", "valueFrom": {"secretKeyRef": {"name": "taskstore-broker", "key": "url"}}}],
    ports=[{"name": "metrics", "containerPort": 9090}],
    readinessProbe={"httpGet": {"path": "/readyz", "port": "metrics"}},
    livenessProbe={"httpGet": {"path": "/livez", "port": 9090}},
)


def trigger(queue, host="TASKWORKER_AMQP_URL"):
    meta = {"mode": "QueueLength", "value": "8", "queueName": queue, "hostFromEnv": host}
    return {"type": "rabbitmq", "metadata": meta}


SCALED = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "python-worker"},
    "spec": {"scaleTargetRef": {"name": "python-worker"}, "triggers": [trigger("taskstore.tool.render_report")]},
}


def worker_docs(change=lambda docs: None):
    docs = copy.deepcopy([CONFIG, WORKER_CONFIG, WORKER, SCALED])
    change(
        {
            "config": docs[1]["data"],
            "pod": docs[2]["spec"]["template"]["spec"],
            "container": docs[2]["spec"]["template"]["spec"]["containers"][0],
            "scaled": docs[3]["spec"],
            "docs": docs,
        }
    )
    return docs


class FleetWorkerTest(unittest.TestCase):
    """Python and TypeScript workers (`mcp-taskstore-worker`), in images of
    their users' own, and taskworker."""

    def assert_violation(self, docs, expected):
        found = violations(docs)
        self.assertTrue(any(expected in v for v in found), f"{expected!r} not in {found}")

    def test_a_compliant_worker_passes(self):
        self.assertEqual(violations(worker_docs()), [])

        def typescript(w):
            w["container"].update(command=["node", "node_modules/.bin/mcp-taskstore-worker"], args=["./dist/tools.js"])

        self.assertEqual(violations(worker_docs(typescript)), [])

        def exec_from_a_shell(w):
            w["container"].update(command=["/bin/sh", "-c", "exec mcp-taskstore-worker reports:tools"], args=[])

        self.assertEqual(violations(worker_docs(exec_from_a_shell)), [])

    def test_the_worker_is_its_containers_process(self):
        cases = {
            "started through npx": lambda w: w["container"].update(command=["npx", "mcp-taskstore-worker"]),
            "started through npm": lambda w: w["container"].update(
                command=["npm", "exec", "--", "mcp-taskstore-worker"]
            ),
            "a shell runs the worker as its child": lambda w: w["container"].update(
                command=["sh", "-c", "mcp-taskstore-worker reports:tools"], args=[]
            ),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation(worker_docs(change), expected)

    def test_its_probes_reach_its_endpoint(self):
        cases = {
            "is not set": lambda w: w["config"].pop("TASKWORKER_METRICS_LISTEN"),
            "is loopback": lambda w: w["config"].update(TASKWORKER_METRICS_LISTEN="127.0.0.1:9090"),
            "a probe asks port 9090": lambda w: w["config"].update(TASKWORKER_METRICS_LISTEN="0.0.0.0:9091"),
            "a probe asks port 9100": lambda w: w["container"]["readinessProbe"]["httpGet"].update(port=9100),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation(worker_docs(change), expected)
        # The flag wins over the variable, as in the programs.
        flagged = worker_docs(lambda w: w["container"]["args"].extend(["--metrics-listen", "0.0.0.0:9091"]))
        self.assert_violation(flagged, "listens on 9091")

    def test_its_drain_ends_before_it_is_killed(self):
        cases = {
            "TASKWORKER_SHUTDOWN_GRACE (120 s)": lambda w: w["config"].update(TASKWORKER_SHUTDOWN_GRACE="2m"),
            "TASKWORKER_SHUTDOWN_GRACE (95 s)": lambda w: w["container"]["args"].extend(["--shutdown-grace", "95s"]),
            # Unset: the programs' default, 30 s.
            "TASKWORKER_SHUTDOWN_GRACE (30 s)": lambda w: (
                w["config"].pop("TASKWORKER_SHUTDOWN_GRACE"),
                w["pod"].update(terminationGracePeriodSeconds=30),
            ),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation(worker_docs(change), expected)

    def test_selectors_select_pods(self):
        def add(doc):
            return lambda w: w["docs"].append(doc)

        elsewhere = {"matchLabels": {"app.kubernetes.io/name": "pyworker"}}
        cases = {
            "its selector does not match its own pod template": lambda w: w["docs"][2]["spec"]["selector"][
                "matchLabels"
            ].update({"app.kubernetes.io/component": "workers"}),
            "PodDisruptionBudget/x: selects no pod": add(
                {"kind": "PodDisruptionBudget", "metadata": {"name": "x"}, "spec": {"selector": elsewhere}}
            ),
            "NetworkPolicy/x: selects no pod": add(
                {"kind": "NetworkPolicy", "metadata": {"name": "x"}, "spec": {"podSelector": elsewhere}}
            ),
            "PodMonitor/x: selects no pod": add(
                {"kind": "PodMonitor", "metadata": {"name": "x"}, "spec": {"selector": elsewhere}}
            ),
            "Service/x: selects no pod": add(
                {"kind": "Service", "metadata": {"name": "x"}, "spec": {"selector": elsewhere["matchLabels"]}}
            ),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation(worker_docs(change), expected)
        # An empty selector selects every pod; a partial one, those it names.
        fine = worker_docs(
            lambda w: w["docs"].extend(
                [
                    {"kind": "NetworkPolicy", "metadata": {"name": "all"}, "spec": {"podSelector": {}}},
                    {
                        "kind": "PodMonitor",
                        "metadata": {"name": "workers"},
                        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/component": "worker"}}},
                    },
                ]
            )
        )
        self.assertEqual(violations(fine), [])

    def test_keda_scales_what_exists_on_its_tool_queues(self):
        cases = {
            "scales Deployment/py-worker, which this rendering does not have": lambda w: w["scaled"][
                "scaleTargetRef"
            ].update(name="py-worker"),
            "reads hostFromEnv AMQP_URL": lambda w: w["scaled"]["triggers"].append(
                trigger("taskstore.tool.x", host="AMQP_URL")
            ),
            "watches 'render_report', not a tool queue": lambda w: w["scaled"]["triggers"].append(
                trigger("render_report")
            ),
            "watches 'jobs.tool.x', not a tool queue of the service's prefix (taskstore.tool.<tool>)": lambda w: w[
                "scaled"
            ]["triggers"].append(trigger("jobs.tool.x")),
        }
        for expected, change in cases.items():
            with self.subTest(expected):
                self.assert_violation(worker_docs(change), expected)
        # The prefix is the service's.
        config = copy.deepcopy(CONFIG)
        config["data"]["TASKSTORE_QUEUE_PREFIX"] = "jobs"
        docs = worker_docs()
        docs[0] = config
        self.assert_violation(docs, "not a tool queue of the service's prefix (jobs.tool.<tool>)")

    def test_taskworkers_triggers_are_the_tools_it_serves(self):
        def taskworker(tools, command_tools=False):
            def change(w):
                w["container"].update(command=["/usr/local/bin/taskworker"], args=[])
                w["config"]["TASKWORKER_TOOLS"] = tools
                if command_tools:
                    w["config"]["TASKWORKER_COMMAND_TOOLS"] = "/etc/taskworker/tools.toml"

            return change

        self.assertEqual(violations(worker_docs(taskworker("render_report"))), [])
        self.assert_violation(worker_docs(taskworker("render_report,hash")), "no trigger watches the queue of hash")
        self.assert_violation(
            worker_docs(taskworker("echo")), "watches the queue of render_report, which taskworker does not serve"
        )
        # The backlog query counts exactly the tools it serves.
        def with_backlog(tools_served, counted):
            def change(w):
                taskworker(tools_served)(w)
                w["scaled"]["triggers"].append(
                    {
                        "type": "prometheus",
                        "metadata": {
                            "query": f'sum(max by (tool) (taskstore_dispatch_waiting{{tool=~"{counted}"}}))',
                            "threshold": "8",
                        },
                    }
                )

            return change

        self.assertEqual(violations(worker_docs(with_backlog("render_report", "render_report"))), [])
        self.assert_violation(
            worker_docs(with_backlog("render_report,hash", "render_report")),
            "the backlog query leaves out hash, which taskworker serves",
        )
        self.assert_violation(
            worker_docs(with_backlog("render_report", "render_report|echo")),
            "the backlog query counts echo, which taskworker does not serve",
        )
        # Command tools are named in a file the rendering does not hold: a
        # trigger may watch one.
        with_command_tools = worker_docs(taskworker("render_report", command_tools=True))
        with_command_tools[3]["spec"]["triggers"].append(trigger("taskstore.tool.convert"))
        self.assertEqual(violations(with_command_tools), [])


if __name__ == "__main__":
    unittest.main()
