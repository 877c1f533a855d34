"""Two emulators built in one process share nothing (issue 14): each has its own store, loaded
predictors and their batchers, predictor options, operation handlers and lastUseTime throttle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dataplane
from app import create_app
from core.payloads import ANONYMOUS, ModelRef, PredictRequest
from core.settings import Settings
from tests.kit import modelkit
from tests.kit.operations import wait_operation

M = "/v1/projects/p/models"


def _client(root: Path, config: Path, **changes: Any) -> Any:
    settings = Settings(state_dir=root / "state", config_file=config).replace(**changes)
    flask_app = create_app(settings, warm=False)
    client = flask_app.test_client()
    client.emu = flask_app.extensions["mlemu"]
    return client


def test_two_emulators_in_one_process_share_nothing(tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "sk", "linreg", features=2)
    modelkit.xgboost_model(tmp_path / "xgb", features=2)
    config = modelkit.bootstrap_file(tmp_path / "mlemu.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": str(tmp_path / "sk")}}},
        "xgb": {"versions": {"v1": {"deploymentUri": str(tmp_path / "xgb")}}},
    })
    one = _client(tmp_path / "one", config, xgboost_nthread=1)
    two = _client(tmp_path / "two", config, xgboost_nthread=2)
    emu1, emu2 = one.emu, two.emu
    assert emu1.store is not emu2.store and emu1.deployments is not emu2.deployments

    # Predictor options: each emulator loads XGBoost with its own thread count.
    xgb = ModelRef("p", "xgb", "v1")
    assert emu1.deployments.get(emu1.store.get_version(xgb.resource_name))._nthread == 1
    assert emu2.deployments.get(emu2.store.get_version(xgb.resource_name))._nthread == 2

    # Batchers belong to the deployments that loaded the predictor.
    caller = ANONYMOUS
    sk = ModelRef("p", "sk", "v1")
    dataplane.predict(emu1, caller, sk, PredictRequest([[1.0, 2.0]], {}))
    p1 = emu1.deployments.get(emu1.store.get_version(sk.resource_name))
    assert emu1.deployments.batchers.existing(p1) is not None
    assert emu2.deployments.batchers.existing(p1) is None

    # The lastUseTime throttle is per emulator: the same version name predicted through the
    # second emulator right after the first is still stamped in the second one's store.
    dataplane.predict(emu2, caller, sk, PredictRequest([[1.0, 2.0]], {}))
    assert emu1.store.get_version(sk.resource_name).last_use_time
    assert emu2.store.get_version(sk.resource_name).last_use_time
    assert set(emu1.last_use) == set(emu2.last_use) == {sk.resource_name}
    assert emu1.last_use is not emu2.last_use
    # The serving-version cache (registry/lookup.py) is kept per store.
    assert emu1.store.scratch()["serving"][1] and emu2.store.scratch()["serving"][1]
    assert emu1.store.scratch() is not emu2.store.scratch()

    # Operation handlers are registered on each emulator's own task runner...
    assert emu1.tasks.handler("CREATE_VERSION") is not None
    emu1.tasks.register("ONLY_HERE", lambda emu, task: None, lambda emu, task, r, e: None)
    assert emu2.tasks.handler("ONLY_HERE") is None
    # ... and run there: a versions.create on each emulator finishes in its own store.
    for client in (one, two):
        assert client.post(M, json={"name": "made"}).status_code == 200
        op = client.post(f"{M}/made/versions",
                         json={"name": "v1", "deploymentUri": str(tmp_path / "sk")}).json
        assert wait_operation(client, op)["response"]["state"] == "READY"
        made = client.emu.store.get_version("projects/p/models/made/versions/v1")
        assert client.emu.deployments.is_loaded(made)
