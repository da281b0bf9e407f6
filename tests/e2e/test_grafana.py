"""Issue 28: the Grafana dashboard for our Prometheus metrics (deploy/grafana/kcoral.json) uses
only metric names a live server's /metrics has. The per-GPU families (kcoral_gpu_*) appear only
on GPU servers: here they must be ones metrics.cc renders for each GPU, and
scripts/gpu-dashboard.sh checks them against a GPU server's /metrics on the H200."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "kcoral.json"
METRIC = re.compile(r"\bkcoral_[a-z0-9_]+\b")


def expressions(node) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in expressions(value)]
    return []


def used_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = expressions(dashboard["panels"]) + expressions(dashboard["templating"])
    assert len(exprs) >= 10
    return {name for expr in exprs for name in METRIC.findall(expr)}


def exposed_metrics(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_grafana_dashboard_uses_only_metrics_the_server_exposes(make_server):
    server = make_server("--num-workers", "1")
    exposed = exposed_metrics(httpx.get(server.url + "/metrics", timeout=10).text)
    used = used_metrics()
    gpu_only = {name for name in used if name.startswith("kcoral_gpu_")}
    assert not (used - gpu_only) - exposed, f"not in /metrics: {sorted((used - gpu_only) - exposed)}"
    rendered_per_gpu = (REPO / "src" / "server" / "status" / "metrics.cc").read_text()
    for name in gpu_only:
        assert f'"{name}"' in rendered_per_gpu, f"{name} is not a per-GPU metric of metrics.cc"


def test_grafana_dashboard_is_importable_json():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] == "KCoral"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"] and all(t["expr"] for t in panel["targets"])
