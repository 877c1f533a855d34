"""Vertex AI custom containers as local processes (predictors/container.py, container_process.py,
container_guard.py), against the real stdlib server tests/kit/containerkit.py writes: the
environment it is given, forwarding, the bounds, refusals, failed starts and the end of its
process (stopped, and when its serving process dies)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.errors import (
    ApiError,
    DeadlineExceeded,
    FailedPrecondition,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from predictors.container import ContainerHost, ContainerLimits, ContainerPredictor, expand
from predictors.container_process import ContainerProcess
from tests.kit import containerkit

#: A generous bound for a process to be gone (reaped) after it was ended; never a target.
GONE_S = 120.0
ROOT = Path(__file__).resolve().parents[2]


def _spec(script: Path, **extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, str(script)], "endpointId": "11",
            "deployedModelId": "22", "project": "p", **extra}


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie still answers kill(0): it is gone once its parent (or init) reaps it.
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def host() -> Any:
    made = ContainerHost(ContainerLimits(enabled=True, max_processes=2))
    yield made
    made.stop_all()


def test_kubernetes_references_expand() -> None:
    env = {"A": "1", "PORT": "8080"}
    assert expand("--port=$(PORT) $(A)$(A)", env) == "--port=8080 11"
    assert expand("$$(PORT) $(MISSING) $", env) == "$(PORT) $(MISSING) $"


def test_environment_routes_parameters_and_storage(host: Any, tmp_path: Path) -> None:
    script = containerkit.write_server(tmp_path / "srv")
    artifacts = containerkit.write_artifacts(tmp_path / "model", 2.0)
    spec = _spec(script, args=["--factor", "$(FACTOR)"],
                 env=[{"name": "FACTOR", "value": "3"},
                      {"name": "AIP_HTTP_PORT", "value": "1"}],  # cannot move mlemu's port
                 predictRoute="/p", healthRoute="/h")
    predictor = host.start(spec, str(artifacts))
    answer = predictor.predict([[1, 2], [0, 0]], scale=2)
    assert [a["sum"] for a in answer] == [30.0, 12.0]  # (sum + offset) * scale * FACTOR
    env = answer[0]["env"]
    assert env["AIP_HTTP_PORT"] == str(predictor.process.port) != "1"
    assert (env["AIP_HEALTH_ROUTE"], env["AIP_PREDICT_ROUTE"]) == ("/h", "/p")
    assert env["AIP_STORAGE_URI"] == str(artifacts)
    assert (env["AIP_MODE"], env["AIP_DEPLOYED_MODEL_ID"], env["AIP_ENDPOINT_ID"],
            env["AIP_PROJECT_NUMBER"]) == ("PREDICTION", "22", "11", "p")
    assert answer[0]["argv"] == ["--factor", "3"]
    status, content_type, body = predictor.raw(b"1,2,3.5", "text/csv")
    assert (status, content_type, body) == (200, "text/plain", b"6.5")
    assert predictor.raw(b'{"status": 418}', "application/json")[0] == 418


def test_default_routes_and_no_storage(host: Any, tmp_path: Path) -> None:
    predictor = host.start(_spec(containerkit.write_server(tmp_path)), "")
    env = predictor.predict([[1]])[0]["env"]
    assert env["AIP_PREDICT_ROUTE"] == "/v1/endpoints/11/deployedModels/22:predict"
    assert env["AIP_HEALTH_ROUTE"] == "/v1/endpoints/11/deployedModels/22"
    assert "AIP_STORAGE_URI" not in env
    assert not any(k.startswith("MLEMU_") for k in env)


def test_container_errors_keep_their_status_and_bounds_hold(tmp_path: Path) -> None:
    host = ContainerHost(ContainerLimits(enabled=True, timeout_s=1.0, max_response_bytes=1000))
    try:
        predictor = host.start(_spec(containerkit.write_server(tmp_path)), "")
        assert isinstance(predictor, ContainerPredictor)
        for status in (404, 503):
            payload = f'{{"status": {status}}}'.encode()
            assert predictor.raw(payload, "application/json")[0] == status
        with pytest.raises(ApiError) as caught:
            predictor.predict([{"status": 404}])
        assert (caught.value.code.name, caught.value.http_status) == ("INVALID_ARGUMENT", 404)
        assert "asked for 404" in caught.value.message
        with pytest.raises(ApiError) as caught:
            predictor.predict([{"status": 503}])
        assert (caught.value.code.name, caught.value.http_status) == ("INTERNAL", 503)
        with pytest.raises(FailedPrecondition, match='"predictions" list'):
            predictor.predict([{"plain": 1}])
        with pytest.raises(Unavailable, match="larger than 1000 bytes"):
            predictor.predict([{"big": 5000}])
        with pytest.raises(DeadlineExceeded, match="MLEMU_VERTEX_CONTAINER_TIMEOUT_S"):
            predictor.predict([{"sleep": 3600}])
    finally:
        host.stop_all()


def test_refusals(tmp_path: Path) -> None:
    script = containerkit.write_server(tmp_path)
    off = ContainerHost(ContainerLimits())
    with pytest.raises(FailedPrecondition):
        off.start(_spec(script), "")
    listed = ContainerHost(ContainerLimits(enabled=True, commands=("env",), enforce=True))
    assert listed.allowed("env")
    env_path = shutil.which("env")
    assert env_path is not None and listed.allowed(env_path)  # the same file on PATH
    assert not listed.allowed(sys.executable) and not listed.allowed("sh")
    with pytest.raises(PermissionDenied, match="MLEMU_VERTEX_CONTAINER_COMMANDS"):
        listed.start(_spec(script), "")
    with pytest.raises(ValueError, match="MLEMU_VERTEX_CONTAINER_COMMANDS"):
        ContainerHost(ContainerLimits(enabled=True, enforce=True))
    one = ContainerHost(ContainerLimits(enabled=True, max_processes=1))
    try:
        first = one.start(_spec(script), "")
        with pytest.raises(ResourceExhausted, match="MLEMU_VERTEX_MAX_CONTAINERS"):
            one.start(_spec(script), "")
        first.close()
        one.start(_spec(script), "").close()  # a stopped one no longer counts
    finally:
        one.stop_all()


def test_a_command_that_exits_fails_with_its_last_output(host: Any, tmp_path: Path) -> None:
    code = ("import sys\nfor i in range(30): print('line', i, flush=True)\n"
            "print('cannot read /srv/secret/weights/model.bin', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(FailedPrecondition) as failed:
        host.start({**_spec(tmp_path), "command": [sys.executable, "-c", code]}, "")
    message = failed.value.message
    assert "exited with status 3" in message
    assert "cannot read model.bin" in message and "/srv/secret" not in message
    assert "line 29" in message and "line 5\n" not in message  # the last lines only
    assert message.count("\n") <= 21
    with pytest.raises(FailedPrecondition, match="status 127"):
        host.start({**_spec(tmp_path), "command": ["/nonexistent/server"]}, "")


def test_a_container_never_healthy_fails_after_the_bound(tmp_path: Path) -> None:
    """The bound is read from a clock that moves past it only once a health check has really
    been answered 503, so the outcome does not depend on the machine's speed."""
    mark = tmp_path / "health-checked"
    env = {"PATH": os.environ["PATH"], "HEALTH_STATUS": "503", "HEALTH_MARK": str(mark),
           "AIP_HTTP_PORT": "0", "AIP_HEALTH_ROUTE": "/h", "AIP_PREDICT_ROUTE": "/p"}
    script = containerkit.write_server(tmp_path / "srv")
    from predictors import container as container_module

    port = container_module._free_port()
    env["AIP_HTTP_PORT"] = str(port)
    process = ContainerProcess([sys.executable, str(script)], env, port, "test")
    with pytest.raises(FailedPrecondition) as failed:
        process.wait_healthy("/h", 30.0, clock=lambda: 1e9 if mark.exists() else 0.0)
    assert "did not answer 200 within 30 s" in failed.value.message
    assert "container up on" in failed.value.message  # its output, to say why
    assert process.pid and _gone(process.pid)


def test_stop_ends_the_command(host: Any, tmp_path: Path) -> None:
    predictor = host.start(_spec(containerkit.write_server(tmp_path)), "")
    pid = predictor.predict([[1]])[0]["pid"]
    predictor.close()
    assert _gone(pid) and not predictor.process.running
    assert host.running() == []


def test_the_command_dies_with_its_serving_process(tmp_path: Path) -> None:
    script = containerkit.write_server(tmp_path / "srv")
    server = tmp_path / "server.py"
    server.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from predictors.container import ContainerHost, ContainerLimits\n"
        "host = ContainerHost(ContainerLimits(enabled=True))\n"
        f"p = host.start({{'command': [sys.executable, {str(script)!r}], 'endpointId': 'e',"
        " 'deployedModelId': 'd'}, '')\n"
        "print(p.predict([[1]])[0]['pid'], flush=True)\n"
        "time.sleep(3600)\n")
    proc = subprocess.Popen([sys.executable, str(server)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        os.kill(pid, 0)  # running
        os.kill(proc.pid, signal.SIGKILL)  # no atexit, no finalizer: only the guard is left
        proc.wait()
        assert _gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
