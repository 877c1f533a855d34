"""deploy/service.yaml is a Knative Service whose probes hit routes the app serves, on the port
it listens on, and whose environment is made of variables settings.py reads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from core.settings import Settings

SERVICE = Path(__file__).resolve().parents[2] / "deploy" / "service.yaml"


class RecordingEnv(Mapping[str, str]):
    """An empty environment that records every variable Settings.from_env asks for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return default

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def load() -> dict[str, Any]:
    data = yaml.safe_load(SERVICE.read_text())
    assert (data["apiVersion"], data["kind"]) == ("serving.knative.dev/v1", "Service")
    return data


def test_env_names_are_read_by_settings() -> None:
    env = RecordingEnv()
    Settings.from_env(env)
    container = load()["spec"]["template"]["spec"]["containers"][0]
    names = {item["name"] for item in container["env"]}
    assert names and names <= env.asked, names - env.asked
    # ... and the values parse: the settings the service gets are the intended ones.
    settings = Settings.from_env({item["name"]: item["value"] for item in container["env"]})
    assert (settings.grpc_port, settings.iam_mode) == (0, "off")


def test_probes_hit_served_routes_on_the_container_port(make_app: Any) -> None:
    template = load()["spec"]["template"]
    container = template["spec"]["containers"][0]
    port = container["ports"][0]["containerPort"]
    assert port == Settings().port  # Cloud Run sets PORT to it; the image's default matches
    client = make_app()
    for probe in (container["startupProbe"], container["livenessProbe"]):
        assert probe["httpGet"]["port"] == port
        assert client.get(probe["httpGet"]["path"]).status_code == 200
        assert probe["timeoutSeconds"] <= probe["periodSeconds"]
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == "/readyz"  # holds traffic until bootstrap models load
    assert startup["failureThreshold"] * startup["periodSeconds"] <= 240  # Cloud Run's limit


def test_concurrency_matches_the_worker_layout_for_its_cpus() -> None:
    spec = load()["spec"]["template"]["spec"]
    limits = spec["containers"][0]["resources"]["limits"]
    cpus = float(limits["cpu"])
    memory = int(limits["memory"].removesuffix("Gi")) * 1024 ** 3
    workers, threads = Settings().worker_layout(cpus, memory)
    assert spec["containerConcurrency"] == workers * threads
