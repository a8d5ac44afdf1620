"""Checks what operators look at: the alert rules (the PrometheusRule in
deploy/kubernetes/components/servicemonitor/rules.yaml), the Grafana
dashboard (deploy/grafana/taskstore.json) and the queries KEDA scales
workers on (the prometheus triggers of deploy/kubernetes/components/*/
scaledobject.yaml). Every PromQL expression must
parse, and every metric it names must be one the binaries export: the
names are read from the Rust sources' `counter!`/`gauge!`/`histogram!`
calls (a histogram also exports `_bucket`, `_sum` and `_count`). Exits
non-zero, naming each problem."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import promql_parser
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/kubernetes/components/servicemonitor/rules.yaml"
DASHBOARD = ROOT / "deploy/grafana/taskstore.json"
SCALED_OBJECTS = sorted((ROOT / "deploy/kubernetes/components").glob("*/scaledobject.yaml"))
SOURCES = [ROOT / "services", ROOT / "worker" / "src"]
MACRO = re.compile(r'\b(counter|gauge|histogram)!\(\s*"([a-z_][a-z0-9_]*)"')
NAME = re.compile(r"\b(taskstore_[a-z0-9_]+|taskworker_[a-z0-9_]+)\b")


def exported_metrics(sources: list[Path] = SOURCES) -> set[str]:
    names: set[str] = set()
    for source in sources:
        for path in source.rglob("*.rs"):
            for kind, name in MACRO.findall(path.read_text()):
                names.add(name)
                if kind == "histogram":
                    names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def rule_expressions(path: Path = RULES) -> list[tuple[str, str]]:
    doc = yaml.safe_load(path.read_text())
    return [
        (f"rule {rule.get('alert') or rule.get('record')}", str(rule["expr"]))
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
    ]


def dashboard_expressions(path: Path = DASHBOARD) -> list[tuple[str, str]]:
    found = []

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                found.append((f"panel {panel.get('title')!r}", target["expr"]))
            walk(panel.get("panels", []))

    walk(json.loads(path.read_text())["panels"])
    return found


def scaler_expressions(paths: list[Path] = SCALED_OBJECTS) -> list[tuple[str, str]]:
    found = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            for i, trigger in enumerate(doc.get("spec", {}).get("triggers", [])):
                if trigger.get("type") == "prometheus":
                    found.append((f"{path.parent.name} trigger {i}", trigger["metadata"]["query"]))
    return found


def problems(expressions: list[tuple[str, str]], exported: set[str]) -> list[str]:
    found = []
    for where, expr in expressions:
        try:
            promql_parser.parse(expr)
        except ValueError as err:
            found.append(f"{where}: does not parse ({err}): {expr}")
            continue
        for name in NAME.findall(expr):
            if name not in exported:
                found.append(f"{where}: names {name}, which no binary exports")
    return found


def main() -> int:
    expressions = rule_expressions() + dashboard_expressions() + scaler_expressions()
    found = problems(expressions, exported_metrics())
    for problem in found:
        print(problem)
    print(f"{len(expressions)} expressions checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
