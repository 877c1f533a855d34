"""An ml v1 batch prediction job on Beam's DaskRunner against a `dask.distributed` cluster: a
scheduler and two workers as separate processes on 127.0.0.1 (tests/kit/daskkit.py), each with
its own install of mlemu's real wheel (the repository's `pip wheel .`) and nothing of the
repository on its path; the model, the inputs and the outputs in gs:// (the Cloud Storage
emulator), so no process reads another's disk. The server is started with
MLEMU_BEAM_RUNNER=DaskRunner and MLEMU_BEAM_OPTIONS naming the scheduler, as docs/batch.md says.
The job's results equal online :predict's, a bad line is counted in prediction.errors_stats, and
both workers did work; a cancelled job's process is gone and the scheduler drops its tasks. A
Vertex AI job on the same cluster writes Vertex AI's files.
"""

from __future__ import annotations

import importlib
import io
import json
import sys
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import cloudpickle
import numpy as np
import pytest

from tests.conftest import LiveServer, start_server, stop_server
from tests.kit import batchkit, daskkit, modelkit
from tests.kit.mlclient import ml_client

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


def _tasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def _processing(dask_scheduler: Any) -> int:
    return sum(len(w.processing) for w in dask_scheduler.workers.values())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[daskkit.DaskCluster]:
    work = tmp_path_factory.mktemp("dask")
    started = daskkit.DaskCluster(work, daskkit.build_wheel(work), workers=2)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def served(cluster: daskkit.DaskCluster, gcs_emulator: Any,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server whose jobs run on the cluster; a scikit-learn version and a slow custom one
    (packaged as a .tar.gz), both in gs://; four input files in gs://, one with a bad line."""
    base = tmp_path_factory.mktemp("dask-server")
    storage: Any = gcs_emulator.client()
    bucket = storage.create_bucket(BUCKET)
    modelkit.sklearn_model(base / "sk", features=4)
    gcs_emulator.upload_dir(bucket, base / "sk", "models/sk")
    bucket.blob("models/slow/README").upload_from_string("a custom predictor loads no file")
    package = io.BytesIO()
    with tarfile.open(fileobj=package, mode="w:gz") as tar:
        source = batchkit.slow_predictor(0.2).encode()
        info = tarfile.TarInfo("slow_predictor.py")
        info.size = len(source)
        tar.addfile(info, io.BytesIO(source))
    bucket.blob("packages/slow.tar.gz").upload_from_string(package.getvalue())
    for i in range(4):  # four files: four input ranges, one dask task each
        lines = [json.dumps(r) for r in ROWS[i * 30:(i + 1) * 30]]
        if i == 2:
            lines.insert(5, "[1.0, 2.0")  # a bad line: counted, not fatal
        bucket.blob(f"in/rows-{i}.json").upload_from_string("\n".join(lines) + "\n")
    config = modelkit.bootstrap_file(base / "boot.yaml", {
        "sk": {"versions": {"v1": {"deploymentUri": f"gs://{BUCKET}/models/sk",
                                   "framework": "SCIKIT_LEARN"}}},
        "slow": {"versions": {"v1": {"deploymentUri": f"gs://{BUCKET}/models/slow",
                                     "predictionClass": "slow_predictor.SlowPredictor",
                                     "packageUris": [f"gs://{BUCKET}/packages/slow.tar.gz"]}}}})
    server: LiveServer = start_server(base / "state", config=config, env={
        "STORAGE_EMULATOR_HOST": gcs_emulator.host, "MLEMU_PROJECT": "p",
        "MLEMU_BATCH_ANY_FRAMEWORK": "true", "MLEMU_BEAM_RUNNER": "DaskRunner",
        "MLEMU_BEAM_OPTIONS": f"--dask_client_address={cluster.address}"})
    client: Any = cluster.client(workers=2)
    try:
        yield {"ml": ml_client(server.url), "storage": storage, "client": client,
               "state": base / "state", "url": server.url}
    finally:
        client.close()
        stop_server(server.proc)


def test_a_job_runs_on_two_dask_workers_through_gs(cluster: daskkit.DaskCluster,
                                                   served: dict[str, Any]) -> None:
    ml, storage, client = served["ml"], served["storage"], served["client"]
    # Each worker imports mlemu from its own install of the wheel, the real one: with the gRPC
    # modules setup.py generates into the build (a checkout has them only after `make protos`).
    assert sorted(client.run(_module_file, "batch.pipeline").values()) == sorted(
        str(site / "batch" / "pipeline.py") for site in cluster.sites)
    assert sorted(client.run(_module_file, "protocols._generated.grps_pb2").values()) == sorted(
        str(site / "protocols" / "_generated" / "grps_pb2.py") for site in cluster.sites)
    before = client.run(_executed)
    online = ml.projects().predict(name=f"{P}/models/sk",
                                   body={"instances": ROWS}).execute()["predictions"]
    ml.projects().jobs().create(parent=P, body=batchkit.prediction_job(
        "on_dask", [f"gs://{BUCKET}/in/rows-*.json"], f"gs://{BUCKET}/out",
        modelName=f"{P}/models/sk", batchSize=16, maxWorkerCount=2)).execute()
    job = batchkit.wait_job(ml, f"{P}/jobs/on_dask", timeout=300)
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


def test_a_vertex_job_on_dask_writes_vertex_files(served: dict[str, Any]) -> None:
    """A Vertex AI BatchPredictionJob (google-cloud-aiplatform's REST transport) on the same
    cluster: Vertex AI's files (predictions_NNNNN.jsonl and errors_NNNNN.jsonl, one of each per
    input range) and completionStats, not ml v1's."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    ml, storage = served["ml"], served["storage"]
    aiplatform.init(project="p", location="us-central1", api_endpoint=served["url"],
                    api_transport="rest", credentials=AnonymousCredentials())
    model = aiplatform.Model.upload(
        display_name="sk", artifact_uri=f"gs://{BUCKET}/models/sk",
        serving_container_image_uri="us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest")
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="vertex-on-dask", model_name=model.resource_name,
        instances_format="jsonl", gcs_source=f"gs://{BUCKET}/in/rows-*.json",
        gcs_destination_prefix=f"gs://{BUCKET}/vertex-out", batch_size=16, sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED", job.error
    assert (job.completion_stats.successful_count, job.completion_stats.failed_count) == (
        len(ROWS), 1)
    directory = job.output_info.gcs_output_directory.removeprefix(f"gs://{BUCKET}/")
    assert directory.startswith("vertex-out/prediction-sk-")
    texts = {b.name.removeprefix(directory + "/"): b.download_as_text()
             for b in storage.list_blobs(BUCKET, prefix=directory + "/")}
    assert sorted(texts) == sorted(f"{kind}_0000{i}.jsonl" for i in range(4)
                                   for kind in ("predictions", "errors"))
    lines = [json.loads(line) for name, text in texts.items() if name.startswith("predictions")
             for line in text.splitlines()]
    online = ml.projects().predict(name=f"{P}/models/sk",
                                   body={"instances": ROWS}).execute()["predictions"]
    assert sorted(json.dumps(line["instance"]) for line in lines) == sorted(
        json.dumps(row) for row in ROWS)
    by_row = {json.dumps(line["instance"]): line["prediction"] for line in lines}
    np.testing.assert_allclose([by_row[json.dumps(row)] for row in ROWS], online)
    [bad] = [json.loads(line) for name, text in texts.items() if name.startswith("errors")
             for line in text.splitlines()]
    assert bad["instance"] is None
    assert bad["error"]["message"].startswith("Failed to parse the instance as JSON: ")
    job.delete()
    model.delete()


def test_cancel_stops_the_job_and_the_cluster_drops_its_tasks(served: dict[str, Any]) -> None:
    ml, client = served["ml"], served["client"]
    # One row a call at 200 ms: 6 s of work per task (30 rows), four tasks on two workers.
    ml.projects().jobs().create(parent=P, body=batchkit.prediction_job(
        "to_cancel", [f"gs://{BUCKET}/in/rows-*.json"], f"gs://{BUCKET}/cancel-out",
        modelName=f"{P}/models/slow", batchSize=1, maxWorkerCount=2)).execute()
    deadline = time.monotonic() + 120
    while not client.run_on_scheduler(_processing) and time.monotonic() < deadline:
        state = ml.projects().jobs().get(name=f"{P}/jobs/to_cancel").execute()["state"]
        assert state in ("QUEUED", "PREPARING", "RUNNING"), state
        time.sleep(0.1)
    assert client.run_on_scheduler(_processing) > 0  # the job's tasks run on the workers
    [pid] = batchkit.pipeline_pids(served["state"])
    assert ml.projects().jobs().cancel(name=f"{P}/jobs/to_cancel").execute() == {}
    job = batchkit.wait_job(ml, f"{P}/jobs/to_cancel")
    assert job["state"] == "CANCELLED", job
    assert batchkit.group_members(pid) == []
    # The job's Dask client died with its process: the scheduler forgets the job's tasks.
    deadline = time.monotonic() + 60
    while client.run_on_scheduler(_tasks) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert client.run_on_scheduler(_tasks) == 0
