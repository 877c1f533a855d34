"""A new user's first hour (issue 16): what the CLI says, how answers end, what a broken stream
says. The README-driven parts (examples, `./mlemu`, banners) are in tests/docs/."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tests.kit import modelkit

PROJECT = "p"

#: A custom predictor streaming two strings and then something JSON cannot hold.
STREAM_SOURCE = '''
class StreamPredictor:
    @classmethod
    def from_path(cls, model_dir):
        return cls()

    def predict(self, instances, **kwargs):
        yield "one"
        yield "two"
        yield object()
'''


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("models")
    modelkit.sklearn_model(root / "sk", "logreg", features=4)
    package = modelkit.custom_package(root / "pkg", "stream_predictor", STREAM_SOURCE, kind="dir")
    modelkit.custom_model_dir(root / "stream")
    config = modelkit.bootstrap_file(root / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": "sk"}}},
        "stream": {"versions": {"v1": {"deploymentUri": "stream",
                                       "predictionClass": "stream_predictor.StreamPredictor",
                                       "packageUris": [str(package)]}}},
    }, project=PROJECT)
    settings = Settings(state_dir=tmp_path_factory.mktemp("state"), config_file=config,
                        default_project=PROJECT)
    return create_app(settings, warm=False).test_client()


def test_models_and_versions_help_describe_every_verb():
    from app import main

    for group, verbs in (("models", ["create", "list"]),
                         ("versions", ["create", "list", "set-default", "delete"])):
        result = CliRunner().invoke(main, [group, "--help"])
        assert result.exit_code == 0
        commands = result.output.split("Commands:")[1].strip().splitlines()
        described = {line.split()[0]: line.split(None, 1)[1:] for line in commands}
        assert sorted(described) == sorted(verbs)
        assert all(description for description in described.values()), result.output


def test_ml_v1_answers_end_with_a_newline_as_googles_do(client):
    predict = client.post(f"/v1/projects/{PROJECT}/models/sk:predict",
                          json={"instances": [[1.0, 2.0, 3.0, 4.0]]})
    assert predict.status_code == 200
    assert predict.data.endswith(b"]}\n") and b"\n" not in predict.data[:-1]  # compact
    model = client.get(f"/v1/projects/{PROJECT}/models/sk")
    # prettyPrint defaults to true (ml.v1 discovery document): two-space indents, final newline
    assert model.data.startswith(b'{\n  "name": ') and model.data.endswith(b"\n}\n")
    compact = client.get(f"/v1/projects/{PROJECT}/models/sk?prettyPrint=false")
    assert compact.data == json.dumps(model.json, separators=(",", ":")).encode() + b"\n"
    missing = client.get(f"/v1/projects/{PROJECT}/models/nope")
    assert missing.status_code == 404
    assert missing.data.startswith(b'{\n  "error": {\n    "code": 404,') and missing.data.endswith(b"}\n")
    failed = client.post(f"/v1/projects/{PROJECT}/models/sk:predict", json={"instances": [[1.0]]})
    assert failed.status_code == 400 and failed.data.endswith(b'"}\n')
    # V2 servers (KServe's JSONResponse, Triton) end their JSON without one, and so does mlemu
    v2 = client.post("/v2/models/sk/infer", json={"inputs": [
        {"name": "x", "datatype": "FP64", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]})
    assert v2.status_code == 200 and v2.data.endswith(b"}")


def test_grps_stream_names_an_item_it_cannot_send(client):
    answer = client.post("/grps/v1/infer/predict?model=stream&streaming=true",
                         json={"str_data": "go"})
    assert answer.status_code == 200  # the status line left before the third item came
    chunks = answer.get_data().replace(b"}{", b"}\n{").splitlines()
    messages = [json.loads(chunk) for chunk in chunks]
    assert [m.get("str_data") for m in messages[:2]] == ["one", "two"]
    last = messages[-1]["status"]
    assert last["status"] == "FAILURE" and last["code"] == 400
    # The cause is the JSON encoder's own words (which encoder answers is wirejson's business).
    assert last["msg"].startswith("Prediction failed: The predictor's item 2 of its stream cannot be "
                                  "sent as str_data: ")
    assert "not JSON serializable" in last["msg"] and "object" in last["msg"]


def test_cli_says_how_to_fix_a_python_without_the_requirements(tmp_path):
    """`python app.py` with a Python that lacks a requirement (the system one, typically): a
    top-level one (click) and one a command imports late (joblib, for `predict`)."""
    model = tmp_path / "sk"
    modelkit.sklearn_model(model, "logreg", features=4)
    (tmp_path / "rows.json").write_text("[1, 2, 3, 4]\n")
    for blocked, args in (("click", ["--help"]),
                          ("joblib", ["predict", "--model-dir", str(model),
                                      "--json-instances", str(tmp_path / "rows.json")])):
        code = (f"import runpy, sys; sys.modules[{blocked!r}] = None; "
                f"sys.path.insert(0, {str(ROOT)!r}); "
                f"sys.argv = ['app.py', *{args!r}]; "
                f"runpy.run_path({str(ROOT / 'app.py')!r}, run_name='__main__')")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                cwd=tmp_path, timeout=120)
        assert result.returncode == 1, result.stderr
        assert f"mlemu: Python module {blocked!r} is missing from {sys.executable}" in result.stderr
        assert "./mlemu" in result.stderr and "Traceback" not in result.stderr
