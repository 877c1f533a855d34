"""Where versions.create may take model files from (issue 17, item 2): loading a pickle runs its
code, so in IAM mode `enforce` local paths are allowed only under the model roots (by default the
bootstrap file's directory and the state directory's `models/`), gs:// URIs only from the allowed
buckets when those are set, and a refused URI says the same whether or not it exists."""

import os
import pickle
import time

import pytest

from app import create_app
from core.settings import Settings
from tests.kit import iamkit, modelkit

ADMIN = "admin-token"
M = "/v1/projects/p/models/m"


class Trap:
    """A pickle that, when loaded, creates the file `Trap.path`: proof of code execution."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def world(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    modelkit.sklearn_model(conf / "iris")
    boot = modelkit.bootstrap_file(conf / "boot.yaml", {"m": {"versions": {
        "v1": {"deploymentUri": "iris"}}}})
    iam = iamkit.write_config(tmp_path / "iam.yaml", {
        "staticTokens": {ADMIN: "user:admin@example.com"},
        "projects": {"p": {"bindings": [{"role": "roles/ml.admin",
                                         "members": ["user:admin@example.com"]}]}}})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.pkl").write_bytes(pickle.dumps(Trap(tmp_path / "pwned")))
    return {"tmp": tmp_path, "boot": boot, "iam": iam, "outside": outside, "conf": conf}


def client_for(world, **changes):
    settings = Settings(state_dir=world["tmp"] / "state", config_file=world["boot"],
                        iam_config=world["iam"], iam_mode="enforce", default_project="p")
    app = create_app(settings.replace(**changes), warm=False)
    return app.test_client(), app.extensions["mlemu"]


def create(client, name, uri, **extra):
    return client.post(f"{M}/versions", headers=iamkit.bearer(ADMIN),
                       json={"name": name, "deploymentUri": uri, **extra})


def wait_done(client, operation):
    """The operation once done; 60 s bounds a hang (a count of polls would bound the machine's
    speed: a loaded machine takes longer to load a model)."""
    deadline = time.monotonic() + 60
    while True:
        op = client.get(f"/v1/{operation}", headers=iamkit.bearer(ADMIN)).get_json()
        if op.get("done"):
            return op
        assert time.monotonic() < deadline, op
        time.sleep(0.05)


def refusal(answer, uri):
    assert answer.status_code == 400, answer.get_json()
    error = answer.get_json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    return error["message"].replace(repr(uri), "URI")


def test_local_paths_outside_the_roots_are_refused_alike_and_never_loaded(world):
    client, _ = client_for(world)
    outside = world["outside"]
    uris = [str(outside), str(world["tmp"] / "no-such-dir"), f"file://{outside}", "file:///root",
            "/etc", os.path.relpath(outside), "../../../../../../tmp",
            str(world["conf"] / ".." / "outside")]
    messages = {refusal(create(client, f"v{i}", uri), uri) for i, uri in enumerate(uris)}
    assert len(messages) == 1, messages  # the same answer whether or not the path exists
    assert "MLEMU_MODEL_ROOTS" in messages.pop()
    assert not (world["tmp"] / "pwned").exists()


def test_a_symlink_inside_a_root_that_leads_out_is_refused(world):
    client, emu = client_for(world)
    link = emu.settings.models_root / "link"
    link.symlink_to(world["outside"])
    refusal(create(client, "v9", str(link)), str(link))
    assert not (world["tmp"] / "pwned").exists()


def test_package_uris_outside_the_roots_are_refused(world):
    client, _ = client_for(world)
    package = str(world["outside"])
    answer = create(client, "v2", str(world["conf"] / "iris"), predictionClass="x.Y",
                    packageUris=[package])
    assert "version.package_uris" in refusal(answer, package)


def test_the_default_roots_serve(world):
    client, emu = client_for(world)
    modelkit.sklearn_model(emu.settings.models_root / "iris2")
    for name, uri in (("v2", str(world["conf"] / "iris")),
                      ("v3", str(emu.settings.models_root / "iris2"))):
        answer = create(client, name, uri)
        assert answer.status_code == 200, answer.get_json()
        assert "error" not in wait_done(client, answer.get_json()["name"])


def test_configured_roots_replace_the_defaults(world):
    client, _ = client_for(world, model_roots=(world["outside"],))
    refusal(create(client, "v2", str(world["conf"] / "iris")), str(world["conf"] / "iris"))
    modelkit.sklearn_model(world["outside"] / "iris")
    assert create(client, "v3", str(world["outside"] / "iris")).status_code == 200


def test_buckets_are_restricted_when_configured(world):
    client, _ = client_for(world, allowed_buckets=("models-ok",))
    uri = "gs://elsewhere/iris"
    assert "MLEMU_ALLOWED_BUCKETS" in refusal(create(client, "v2", uri), uri)
    # An allowed bucket passes the check (the load, with no Cloud Storage here, fails later).
    assert create(client, "v3", "gs://models-ok/iris").status_code == 200


def test_iam_mode_off_keeps_any_local_path_unless_roots_are_set(world, make_app):
    modelkit.sklearn_model(world["outside"] / "iris")
    client = make_app()
    client.post("/v1/projects/p/models", json={"name": "m"})
    ok = client.post(f"{M}/versions", json={"name": "v1",
                                            "deploymentUri": str(world["outside"] / "iris")})
    assert ok.status_code == 200
    strict = make_app(model_roots=(world["conf"],), state_dir=world["tmp"] / "state2")
    strict.post("/v1/projects/p/models", json={"name": "m"})
    answer = strict.post(f"{M}/versions", json={"name": "v1",
                                                "deploymentUri": str(world["outside"] / "iris")})
    refusal(answer, str(world["outside"] / "iris"))


def test_batch_prediction_jobs_take_a_model_uri_only_from_the_roots(world):
    from tests.kit import batchkit

    client, _ = client_for(world, batch_any_framework=True)
    uri = str(world["outside"])
    job = batchkit.prediction_job("j1", [str(world["tmp"] / "in.json")], str(world["tmp"] / "out"),
                                  uri=uri)
    answer = client.post("/v1/projects/p/jobs", headers=iamkit.bearer(ADMIN), json=job)
    assert "job.prediction_input.uri" in refusal(answer, uri)
    assert not (world["tmp"] / "pwned").exists()


def test_batch_prediction_jobs_read_and_write_only_under_the_data_roots(world):
    """A job reads its inputs and writes its outputs as the server's user: in enforce mode local
    paths only under the data roots (default: the state directory's data/), refused alike whether
    or not they exist; a root given by MLEMU_DATA_ROOTS replaces the default."""
    from tests.kit import batchkit

    client, emu = client_for(world, batch_any_framework=True)
    data = emu.settings.data_root
    data.mkdir(parents=True)
    (data / "in.json").write_text("[1, 2, 3, 4]\n")
    secret = world["tmp"] / "secret.txt"
    secret.write_text("not for callers\n")
    model = str(world["conf"] / "iris")
    for n, (inputs, output, field) in enumerate([
            ([str(secret)], str(data / "out"), "input_paths"),
            ([str(world["tmp"] / "missing-*.json")], str(data / "out"), "input_paths"),
            ([str(data / ".." / ".." / "secret.txt")], str(data / "out"), "input_paths"),
            ([str(data / "in.json")], str(world["tmp"] / "elsewhere"), "output_path"),
            ([str(data / "in.json")], "file://" + str(world["tmp"] / "elsewhere"), "output_path")]):
        job = batchkit.prediction_job(f"refused_{n}", inputs, output, uri=model)
        answer = client.post("/v1/projects/p/jobs", headers=iamkit.bearer(ADMIN), json=job)
        message = refusal(answer, output if field == "output_path" else inputs[0])
        assert message == (f"Field: job.prediction_input.{field} Error: URI is not allowed: batch "
                           "prediction data must be under a directory this server keeps job data "
                           "in (MLEMU_DATA_ROOTS).")
    assert not (world["tmp"] / "elsewhere").exists()
    inside = batchkit.prediction_job("allowed", [str(data / "in*.json")], str(data / "out"),
                                     uri=model)
    answer = client.post("/v1/projects/p/jobs", headers=iamkit.bearer(ADMIN), json=inside)
    assert answer.status_code == 200, answer.get_json()
    own, _ = client_for(world, batch_any_framework=True, data_roots=(str(world["tmp"]),),
                        state_dir=world["tmp"] / "state2")
    job = batchkit.prediction_job("own_root", [str(secret)], str(world["tmp"] / "out"), uri=model)
    assert own.post("/v1/projects/p/jobs", headers=iamkit.bearer(ADMIN), json=job).status_code == 200
