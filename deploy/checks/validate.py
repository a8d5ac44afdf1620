"""Renders every way the manifests are meant to be combined and checks
each rendering: built-in kinds strictly against the Kubernetes schemas
(kubernetes-validate), custom resources against their published schemas
(crds.js), and everything against our policy (policy.py). Exits non-zero,
naming each problem, when anything fails."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import yaml

from policy import violations

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes we support: native gRPC probes and preStop sleep
# are GA or on by default from here.
KUBERNETES_VERSION = "1.32.0"
CRD_GROUPS = {"keda.sh", "monitoring.coreos.com"}

# Overlays and examples as they are, and the base with each component, so
# that no component goes unchecked (python-worker and typescript-worker,
# whose images only an overlay can name, through examples/custom-workers).
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "overlays/dev": ("overlays/dev", []),
    "overlays/production": ("overlays/production", []),
    "examples/custom-workers": ("examples/custom-workers", []),
    "base + worker-hpa": ("base", ["worker-hpa"]),
    "base + keda + servicemonitor": ("base", ["keda", "servicemonitor"]),
}


def render(directory: str, components: list[str]) -> list[dict]:
    if not components:
        target = KUBERNETES / directory
        return load(subprocess.run(["kubectl", "kustomize", str(target)], check=True, capture_output=True, text=True).stdout)
    with tempfile.TemporaryDirectory(dir=KUBERNETES) as scratch:
        here = Path(scratch)
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [f"../{directory}"],
            "components": [f"../components/{name}" for name in components],
        }
        (here / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        rendered = subprocess.run(["kubectl", "kustomize", str(here)], check=True, capture_output=True, text=True)
        return load(rendered.stdout)


def load(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def schema_problems(docs: list[dict]) -> tuple[list[str], list[dict]]:
    problems, custom = [], []
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["apiVersion"].split("/")[0] in CRD_GROUPS:
            custom.append(doc)
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            path = "/".join(str(p) for p in err.path)
            problems.append(f"{where}: {err.message} (at {path or 'top level'})")
        except kubernetes_validate.SchemaNotFoundError as err:
            problems.append(f"{where}: no schema to check it against: {err}")
    return problems, custom


def custom_resource_problems(docs: list[dict]) -> list[str]:
    if not docs:
        return []
    checked = subprocess.run(
        ["node", str(Path(__file__).with_name("crds.js"))],
        input=json.dumps(docs),
        capture_output=True,
        text=True,
    )
    if checked.returncode not in (0, 1):
        return [f"crds.js failed: {checked.stderr.strip()}"]
    return [line for line in checked.stdout.splitlines() if line]


def main() -> int:
    failed = False
    for name, (directory, components) in VARIANTS.items():
        docs = render(directory, components)
        problems, custom = schema_problems(docs)
        problems += custom_resource_problems(custom)
        problems += violations(docs, allow_open=(name == "overlays/dev"))
        kinds = sorted({d["kind"] for d in docs})
        if problems:
            failed = True
            print(f"deploy: {name}: {len(problems)} problem(s)")
            for problem in problems:
                print(f"  {problem}")
        else:
            print(f"deploy: {name}: {len(docs)} objects valid ({', '.join(kinds)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
