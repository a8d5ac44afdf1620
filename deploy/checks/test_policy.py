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


if __name__ == "__main__":
    unittest.main()
