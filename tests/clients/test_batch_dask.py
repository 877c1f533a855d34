"""An ml v1 batch prediction job on Beam's DaskRunner against a `dask.distributed` cluster: a
scheduler and two workers as separate processes on 127.0.0.1 (tests/daskkit.py), each worker
with its own install of mlemu's worker packages built as a wheel and nothing of the repository
on its path; the model, the inputs and the outputs in gs:// (the Cloud Storage emulator), so no
process reads another's disk. The server is started with MLEMU_BEAM_RUNNER=DaskRunner and
MLEMU_BEAM_OPTIONS naming the scheduler, as docs/batch.md says. The job's results equal online
:predict's, a bad line is counted in prediction.errors_stats, and both workers did work.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pytest

from tests import batchkit, daskkit, modelkit
from tests.clients.mlclient import ml_client
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.slow
P = "projects/p"
BUCKET = "mlemu-dask"
ROWS = [[float(i % 7), 0.25 * i, -1.0 + i / 10, 2.0] for i in range(120)]

# The functions below run on the workers, which cannot import this module: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _module_file(name: str) -> str:
    return str(importlib.import_module(name).__file__)


def _executed(dask_worker: Any) -> int:
    return int(dask_worker.state.executed_count)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[daskkit.DaskCluster]:
    work = tmp_path_factory.mktemp("dask")
    started = daskkit.DaskCluster(work, daskkit.build_wheel(work), workers=2)
    try:
        yield started
    finally:
        started.stop()


def test_a_job_runs_on_two_dask_workers_through_gs(cluster: daskkit.DaskCluster,
                                                   gcs_emulator: Any, tmp_path: Path) -> None:
    client: Any = cluster.client(workers=2)
    try:
        # Each worker imports mlemu from its own install of the wheel.
        assert sorted(client.run(_module_file, "batch.pipeline").values()) == sorted(
            str(site / "batch" / "pipeline.py") for site in cluster.sites)
        before = client.run(_executed)

        storage: Any = gcs_emulator.client()
        bucket = storage.create_bucket(BUCKET)
        modelkit.sklearn_model(tmp_path / "sk", features=4)
        gcs_emulator.upload_dir(bucket, tmp_path / "sk", "models/sk")
        for i in range(4):  # four files: four input ranges, one dask task each
            lines = [json.dumps(r) for r in ROWS[i * 30:(i + 1) * 30]]
            if i == 2:
                lines.insert(5, "[1.0, 2.0")  # a bad line: counted, not fatal
            bucket.blob(f"in/rows-{i}.json").upload_from_string("\n".join(lines) + "\n")
        config = modelkit.bootstrap_file(tmp_path / "boot.yaml", {"sk": {"versions": {"v1": {
            "deploymentUri": f"gs://{BUCKET}/models/sk", "framework": "SCIKIT_LEARN"}}}})
        server = start_server(tmp_path / "state", config=config, env={
            "STORAGE_EMULATOR_HOST": gcs_emulator.host, "MLEMU_PROJECT": "p",
            "MLEMU_BATCH_ANY_FRAMEWORK": "true", "MLEMU_BEAM_RUNNER": "DaskRunner",
            "MLEMU_BEAM_OPTIONS": f"--dask_client_address={cluster.address}"})
        try:
            ml = ml_client(server.url)
            online = ml.projects().predict(name=f"{P}/models/sk",
                                           body={"instances": ROWS}).execute()["predictions"]
            ml.projects().jobs().create(parent=P, body=batchkit.prediction_job(
                "on_dask", [f"gs://{BUCKET}/in/rows-*.json"], f"gs://{BUCKET}/out",
                modelName=f"{P}/models/sk", batchSize=16, maxWorkerCount=2)).execute()
            job = batchkit.wait_job(ml, f"{P}/jobs/on_dask", timeout=300)
        finally:
            stop_server(server.proc)
        assert job["state"] == "SUCCEEDED", job
        assert job["predictionOutput"]["predictionCount"] == str(len(ROWS))
        assert job["predictionOutput"]["errorCount"] == "1"

        texts = {b.name.removeprefix("out/"): b.download_as_text()
                 for b in storage.list_blobs(BUCKET, prefix="out/")}
        assert sorted(n for n in texts if n.startswith("prediction.results")) == [
            f"prediction.results-0000{i}-of-00004" for i in range(4)]
        np.testing.assert_allclose(sorted(batchkit.results(texts)), sorted(online))
        [(message, count)] = batchkit.error_stats(texts).items()
        assert count == 1 and message.startswith("Failed to parse the instance as JSON: "), message
        after = client.run(_executed)
        assert all(after[w] > before[w] for w in after), (before, after)  # both workers worked
    finally:
        client.close()
