"""deploy/kubernetes, rendered by ``kubectl kustomize`` for each overlay and checked: every core
object validates against the Kubernetes schemas (kubernetes-validate ships them, so this runs
offline); the ServiceMonitor (a CRD, no schema there) is checked field by field; and the shape
the docs promise holds: nodes ready on /readyz and live on /healthz, a migration Job, a worker,
a PodDisruptionBudget, a Service, secrets mounted as files named by DUETIME_*_FILE settings that
duetime knows, and every pod non-root under the restricted Pod Security profile."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from duetime.config import FILE_SUFFIX, SECRET_SETTINGS
from duetime.variables import CLIENT_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUBE / "overlays").iterdir())
SECRET = "duetime-secrets"
# The oldest Kubernetes release these manifests are checked against, and the newest whose
# schemas the installed kubernetes-validate ships.
VERSIONS = ("1.28.0", kubernetes_validate.latest_version())


def _kustomize_version(kubectl: str) -> tuple[int, ...]:
    done = subprocess.run(
        [kubectl, "version", "--client"], capture_output=True, text=True, timeout=60
    )
    found = re.search(r"Kustomize Version: v(\d+)\.(\d+)", done.stdout)
    return tuple(int(n) for n in found.groups()) if found else (0,)


@pytest.fixture(scope="module")
def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed (scripts/test installs Debian's kubernetes-client)")
    if _kustomize_version(found) < (4,):
        pytest.skip("this kubectl's kustomize is older than v4 (the manifests use `patches`)")
    return found


def _render(kubectl: str, overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBE / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest, kubectl: str) -> tuple[str, list[dict[str, Any]]]:
    return request.param, _render(kubectl, request.param)


def _one(docs: list[dict[str, Any]], kind: str, component: str) -> dict[str, Any]:
    found = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, (kind, component, [d["metadata"]["name"] for d in found])
    return found[0]


def _pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]


def test_there_are_a_dev_and_a_production_overlay() -> None:
    assert {"dev", "production"} <= set(OVERLAYS)


def test_core_objects_validate_against_the_kubernetes_schemas(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: checked below
        for version in VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 7


def test_validation_catches_a_broken_manifest() -> None:
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "three", "selector": {}, "template": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_nodes_probe_readiness_and_liveness_behind_a_service_and_a_budget(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    overlay, docs = rendered
    node = _one(docs, "Deployment", "node")
    (container,) = node["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["serve"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    port = container["ports"][0]
    assert port["name"] == "http" and port["containerPort"] == 8080
    env = {e["name"]: e for e in container["env"]}
    assert env["DUETIME_HOST"]["value"] == "0.0.0.0"
    assert env["DUETIME_NODE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    labels = node["spec"]["template"]["metadata"]["labels"]
    service = _one(docs, "Service", "node")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    budget = _one(docs, "PodDisruptionBudget", "node")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["maxUnavailable"] == 1
    if overlay == "production":
        assert node["spec"]["replicas"] >= 3


def test_migration_job_and_worker(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = rendered
    job = _one(docs, "Job", "migrate")
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    assert migrate["args"] == ["migrate"]
    assert {e["name"] for e in migrate["env"]} == {"DUETIME_DB_FILE"}
    worker = _one(docs, "Deployment", "worker")
    spec = worker["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["worker", "app:worker"]
    env = {e["name"]: e for e in container["env"]}
    service = _one(docs, "Service", "node")["metadata"]["name"]
    assert env["DUETIME_URL"]["value"] == f"http://{service}:8080"
    assert env["DUETIME_API_KEY_FILE"]["value"] == "/run/secrets/duetime/api_key"
    assert "DUETIME_API_KEY" not in env
    (app,) = [v for v in spec["volumes"] if v["name"] == "app"]
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert app["configMap"]["name"] in {m["metadata"]["name"] for m in maps}
    assert container["workingDir"] == "/app"


def test_example_worker_is_the_compose_one() -> None:
    assert (KUBE / "base" / "app.py").read_text() == (ROOT / "deploy/worker/app.py").read_text()


def test_secrets_are_files_named_by_known_settings(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    known = {f"DUETIME_{name.upper()}{FILE_SUFFIX}" for name in SECRET_SETTINGS}
    known |= {v for v in CLIENT_VARIABLES if v.endswith(FILE_SUFFIX)}
    for name, spec in _pod_specs(docs):
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in spec["containers"]:
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            for env in container["env"]:
                variable, value = env["name"], env.get("value", "")
                assert not re.search(r"TOKEN$|KEY$|PASSWORD|_DB$", variable) or (
                    "valueFrom" in env
                ), (name, variable, "a secret's value is never written in a manifest")
                if not variable.endswith(FILE_SUFFIX):
                    continue
                assert variable in known, (name, variable)
                folder, _, key = value.rpartition("/")
                assert mounts[folder]["readOnly"] is True, (name, variable)
                secret = volumes[mounts[folder]["name"]]["secret"]
                assert secret["secretName"] == SECRET, (name, variable)
                assert key in {item["path"] for item in secret["items"]}, (name, variable)


def test_every_pod_runs_non_root_under_the_restricted_profile(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, docs = rendered
    pods = dict(_pod_specs(docs))
    assert len(pods) == 3
    for name, spec in pods.items():
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0, name
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            own = container["securityContext"]
            assert own["allowPrivilegeEscalation"] is False, name
            assert own["capabilities"]["drop"] == ["ALL"], name
            assert own["readOnlyRootFilesystem"] is True, name
    for namespace in (d for d in docs if d["kind"] == "Namespace"):
        labels = namespace["metadata"].get("labels", {})
        assert labels.get("pod-security.kubernetes.io/enforce") == "restricted"


def test_service_monitor_scrapes_the_nodes_with_the_metrics_token(kubectl: str) -> None:
    docs = _render(kubectl, "production")
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    service = _one(docs, "Service", "node")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert re.fullmatch(r"\d+s", endpoint["interval"])
    auth = endpoint["authorization"]
    assert auth["type"] == "Bearer"
    assert auth["credentials"] == {"name": SECRET, "key": "metrics_token"}
    node = _one(docs, "Deployment", "node")
    env = {
        e["name"]: e.get("value") for e in node["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["DUETIME_METRICS_TOKEN_FILE"].endswith("/metrics_token")
