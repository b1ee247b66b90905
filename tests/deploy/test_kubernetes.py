"""deploy/kubernetes/daskcluster.yaml against the dask-kubernetes operator's own DaskCluster
definition (its CRD's OpenAPI schema, read from the installed package's files, offline): the
schema validates it, and no field of it is one the API server would prune as unknown; and its
containers' commands, run here as the operator would run its pods, make a cluster that
gpuframe.connect joins."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from stand_ins import DASK, REAL_DASK, check_a_shuffle_join, install

import gpuframe

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes" / "daskcluster.yaml"
CRD = "operator/deployment/helm/dask-kubernetes-operator/crds/daskcluster.yaml"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("dask-kubernetes is not installed (the Makefile installs its files)")
    crd = yaml.safe_load((Path(spec.submodule_search_locations[0]) / CRD).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields of ``value`` that ``schema`` does not declare: Kubernetes prunes them from a
    custom resource without a word, so a misspelt or misplaced field would silently vanish."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
            "x-kubernetes-int-or-string"):
        return []
    if isinstance(value, dict):
        if "properties" not in schema:
            extra = schema.get("additionalProperties")
            return [p for k, v in value.items() for p in
                    (unknown_fields(v, extra, f"{path}.{k}") if isinstance(extra, dict) else [])]
        found = []
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(item, schema["properties"][key], f"{path}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value)
                for p in unknown_fields(item, schema["items"], f"{path}[{i}]")]
    return []


def manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


def test_the_manifest_is_a_valid_daskcluster(schema):
    document = manifest()
    assert (document["apiVersion"], document["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    jsonschema.validate(document, schema)
    # metadata is the API server's own ObjectMeta, outside the CRD's schema
    assert unknown_fields({k: v for k, v in document.items() if k != "metadata"}, {
        "properties": {"apiVersion": {}, "kind": {}, **schema["properties"]}}) == []


def test_each_worker_pod_gets_one_gpu_and_the_dashboard_stays_on_loopback(schema):
    spec = manifest()["spec"]
    (worker,) = spec["worker"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert worker["args"][:3] == ["dask", "cuda", "worker"]
    (scheduler,) = spec["scheduler"]["spec"]["containers"]
    args = scheduler["args"]
    assert args[args.index("--dashboard-address") + 1].startswith("127.0.0.1:")


def test_the_check_catches_a_misplaced_field(schema):
    document = manifest()
    document["spec"]["worker"]["spec"]["containers"][0]["resource"] = {"limits": {}}
    document["spec"]["worker"]["replica"] = 2
    assert sorted(unknown_fields(document["spec"], schema["properties"]["spec"], "spec")) == [
        "spec.worker.replica", "spec.worker.spec.containers[0].resource"]
    document["spec"]["worker"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema)


@pytest.mark.timeout(120)
def test_the_pods_commands_make_a_cluster_that_connect_joins(tmp_path):
    """The scheduler's and each worker replica's args run as processes here, with the values
    the operator substitutes (``$(DASK_SCHEDULER_ADDRESS)``, ``$(DASK_WORKER_NAME)``) and the
    containers' environment and a folder of the test for each volume; `dask cuda worker` is a
    plain worker (tests/deploy/stand_ins.py), and the scheduler, which a pod opens on every
    interface, listens on loopback only."""
    spec = manifest()["spec"]
    (scheduler,) = spec["scheduler"]["spec"]["containers"]
    (worker,) = spec["worker"]["spec"]["containers"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    stand_ins = install(tmp_path / "bin", {"dask": DASK})
    env = {**os.environ, "PATH": f"{stand_ins}:{os.environ['PATH']}",
           "REAL_DASK": REAL_DASK, "SCHEDULER_PORT": str(port), "SCHEDULER_HOST": "127.0.0.1"}
    pods = [subprocess.Popen(scheduler["args"], env=env)]
    try:
        for replica in range(spec["worker"]["replicas"]):
            given = {"$(DASK_SCHEDULER_ADDRESS)": address,
                     "$(DASK_WORKER_NAME)": f"gpuframe-worker-{replica}"}
            mounts = {mount["mountPath"]: str(tmp_path / f"{mount['name']}-{replica}")
                      for mount in worker.get("volumeMounts", [])}
            args = [mounts.get(arg, given.get(arg, arg)) for arg in worker["args"]]
            pods.append(subprocess.Popen(args, env={
                **env, **{item["name"]: item["value"] for item in worker.get("env", [])}}))
        with gpuframe.connect(address, timeout=60) as engine:
            check_a_shuffle_join(engine, spec["worker"]["replicas"])
    finally:
        for pod in pods:
            pod.terminate()
        for pod in pods:
            pod.wait(timeout=30)
