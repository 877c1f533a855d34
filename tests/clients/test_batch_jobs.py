"""Batch prediction jobs end to end with Google's ml v1 client against a live server: TensorFlow
models over JSON (wildcards, bad lines), TF_RECORD and TF_RECORD_GZIP inputs, every output shard
compared with online :predict for the same instances; inputs, model and outputs in gs:// on the
Cloud Storage emulator; the TensorFlow-only rule; and the jobs API's own rules (ids, 409s,
patch with etags, list filters and paging, cancel of a finished job). The JSON and gs:// jobs
run on two workers (forked by the job's fork server: TensorFlow imported after the fork, each
worker its own Cloud Storage client).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from googleapiclient.errors import HttpError

from tests.conftest import start_server, stop_server
from tests.kit import batchkit, modelkit
from tests.kit.mlclient import error_of, ml_client

pytestmark = pytest.mark.slow
P = "projects/p"
BUCKET = "mlemu-batch"
ROWS = [[float(i % 7), 0.5 * i, -1.0 + i / 10] for i in range(40)]


@pytest.fixture(scope="module")
def setup(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tests.kit import tfmodels  # imports TensorFlow: only this module's setup pays for it

    base = tmp_path_factory.mktemp("batch")
    tfmodels.keras_model(base / "keras")
    modelkit.sklearn_model(base / "sk", features=3)
    config = modelkit.bootstrap_file(base / "boot.yaml", {
        "tf": {"versions": {"v1": {"deploymentUri": str(base / "keras")}}},
        "sk": {"versions": {"v1": {"deploymentUri": str(base / "sk")}}}})
    server = start_server(base / "state", config=config,
                          env={"STORAGE_EMULATOR_HOST": gcs_emulator.host, "MLEMU_PROJECT": "p"})
    try:
        ml = ml_client(server.url)
        online = ml.projects().predict(name=f"{P}/models/tf", body={"instances": ROWS}).execute()
        yield {"ml": ml, "base": base, "online": online["predictions"], "gcs": gcs_emulator}
    finally:
        stop_server(server.proc)


def _same_predictions(lines: list[Any], online: list[Any], rows: list[Any]) -> None:
    """Each result line is {output alias: prediction}; as a multiset they equal online's."""
    assert all(isinstance(line, dict) and list(line) == ["output_0"] for line in lines), lines[:3]
    got = sorted(tuple(line["output_0"]) for line in lines)
    want = sorted(tuple(p) for p in online)
    assert len(got) == len(rows)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_json_job_matches_online_predict_and_counts_bad_lines(setup: dict[str, Any]) -> None:
    ml, base = setup["ml"], setup["base"]
    inputs = base / "json-in"
    inputs.mkdir()
    (inputs / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:25]))
    (inputs / "part-1.json").write_text(
        "".join(json.dumps(r) + "\n" for r in ROWS[25:]) + "{not json\n" + "[1.0, 2.0]\n")
    (inputs / "other.txt").write_text("[9, 9, 9]\n")  # not matched by the wildcard
    body = batchkit.prediction_job("json_job", [str(inputs / "part-*.json")], str(base / "json-out"),
                                   modelName=f"{P}/models/tf", batchSize=8, maxWorkerCount=2)
    created = ml.projects().jobs().create(parent=P, body=body).execute()
    assert created["state"] == "QUEUED" and created["jobId"] == "json_job"
    assert created["predictionInput"]["batchSize"] == "8"
    job = batchkit.wait_job(ml, f"{P}/jobs/json_job")
    assert job["state"] == "SUCCEEDED", job
    out = job["predictionOutput"]
    assert (out["predictionCount"], out["errorCount"]) == (str(len(ROWS)), "2")
    assert out["outputPath"] == str(base / "json-out") and out["nodeHours"] > 0
    assert job["createTime"] <= job["startTime"] <= job["endTime"]
    texts = batchkit.local_outputs(base / "json-out")
    _same_predictions(batchkit.results(texts), setup["online"], ROWS)
    errors = batchkit.error_stats(texts)
    assert sum(errors.values()) == 2 and len(errors) == 2
    assert any(m.startswith("Failed to parse the instance as JSON") for m in errors), errors
    # keyed by the error's detail, as the service's pipeline keyed them (issue 34, item 5)
    assert not any(m.startswith("Prediction failed") for m in errors), errors


def test_tfrecord_jobs_match_online_predict(setup: dict[str, Any]) -> None:
    import tensorflow as tf

    ml, base = setup["ml"], setup["base"]
    names = {}
    for data_format in ("TF_RECORD", "TF_RECORD_GZIP"):  # both jobs run at once
        path = base / f"{data_format}.tfrecord"
        options = "GZIP" if data_format == "TF_RECORD_GZIP" else None
        with tf.io.TFRecordWriter(str(path), options=options) as writer:
            for row in ROWS:
                writer.write(json.dumps(row).encode())
        name = names[data_format] = f"rec_{data_format.lower()}"
        body = batchkit.prediction_job(name, [str(path)], f"file://{base / name}", data_format,
                                       versionName=f"{P}/models/tf/versions/v1", maxWorkerCount=1)
        ml.projects().jobs().create(parent=P, body=body).execute()
    for name in names.values():
        job = batchkit.wait_job(ml, f"{P}/jobs/{name}")
        assert job["state"] == "SUCCEEDED", job
        assert job["predictionOutput"]["predictionCount"] == str(len(ROWS))
        texts = batchkit.local_outputs(base / name)
        _same_predictions(batchkit.results(texts), setup["online"], ROWS)
        assert batchkit.shard_lines(texts, "prediction.errors_stats") == []


def test_csv_output_rows_and_header_file(setup: dict[str, Any]) -> None:
    """outputDataFormat CSV as the service's pipeline wrote it (batch/records.py): the keys in
    prediction.results_header.csv, one `\\r\\n`-ended row per prediction in .csv shards, each
    row compared with online :predict; a bad line still goes to the error stats."""
    ml, base = setup["ml"], setup["base"]
    (base / "csv-in.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS) + "oops\n")
    body = batchkit.prediction_job("csv_job", [str(base / "csv-in.json")], str(base / "csv-out"),
                                   modelName=f"{P}/models/tf", outputDataFormat="CSV",
                                   batchSize=4, maxWorkerCount=1)
    ml.projects().jobs().create(parent=P, body=body).execute()
    job = batchkit.wait_job(ml, f"{P}/jobs/csv_job")
    assert job["state"] == "SUCCEEDED", job
    assert (job["predictionOutput"]["predictionCount"], job["predictionOutput"]["errorCount"]) == (
        str(len(ROWS)), "1")
    raw = {p.name: p.read_bytes() for p in (base / "csv-out").iterdir()}
    assert raw.pop("prediction.results_header.csv") == b"output_0\r\n\n"
    shards = sorted(n for n in raw if n.startswith("prediction.results-"))
    assert shards == [f"prediction.results-{i:05d}-of-{len(shards):05d}.csv"
                      for i in range(len(shards))]
    rows = b"".join(raw[n] for n in shards).decode()
    assert rows.endswith("\r\n") and "\n\n" not in rows
    cells = [row.removeprefix('"').removesuffix('"') for row in rows.split("\r\n")[:-1]]
    _same_predictions([{"output_0": json.loads(c)} for c in cells], setup["online"], ROWS)
    errors = batchkit.error_stats({n: v.decode() for n, v in raw.items()})
    assert list(errors.values()) == [1]


def test_gs_inputs_model_and_outputs(setup: dict[str, Any]) -> None:
    ml, base, gcs = setup["ml"], setup["base"], setup["gcs"]
    client = gcs.client()
    bucket = client.create_bucket(BUCKET)
    gcs.upload_dir(bucket, base / "keras", "models/keras")
    for i in (0, 1):
        bucket.blob(f"in/rows-{i}.json").upload_from_string(
            "".join(json.dumps(r) + "\n" for r in ROWS[i * 20:(i + 1) * 20]))
    body = batchkit.prediction_job("gs_job", [f"gs://{BUCKET}/in/rows-*"], f"gs://{BUCKET}/out",
                                   uri=f"gs://{BUCKET}/models/keras", maxWorkerCount=2)
    ml.projects().jobs().create(parent=P, body=body).execute()
    job = batchkit.wait_job(ml, f"{P}/jobs/gs_job")
    assert job["state"] == "SUCCEEDED", job
    texts = {b.name.removeprefix("out/"): b.download_as_text()
             for b in client.list_blobs(BUCKET, prefix="out/")}
    _same_predictions(batchkit.results(texts), setup["online"], ROWS)


def test_only_tensorflow_models_by_default(setup: dict[str, Any]) -> None:
    ml, base = setup["ml"], setup["base"]
    jobs = ml.projects().jobs()
    (base / "one.json").write_text("[1, 2, 3]\n")
    with pytest.raises(HttpError) as refused:
        jobs.create(parent=P, body=batchkit.prediction_job(
            "sk_job", [str(base / "one.json")], str(base / "sk-out"),
            modelName=f"{P}/models/sk")).execute()
    err = error_of(refused.value)
    assert err["code"] == 400 and err["status"] == "FAILED_PRECONDITION"
    assert "TensorFlow SavedModels only" in err["message"]
    assert "MLEMU_BATCH_ANY_FRAMEWORK" in err["message"]
    # A model directory (uri) is looked at when the job prepares: the job fails, saying why.
    jobs.create(parent=P, body=batchkit.prediction_job(
        "sk_uri", [str(base / "one.json")], str(base / "sk-out"), uri=str(base / "sk"))).execute()
    job = batchkit.wait_job(ml, f"{P}/jobs/sk_uri")
    assert job["state"] == "FAILED" and "TensorFlow SavedModels only" in job["errorMessage"]


def test_job_rules(setup: dict[str, Any]) -> None:
    ml, base = setup["ml"], setup["base"]
    jobs = ml.projects().jobs()
    (base / "two.json").write_text("[1, 2, 3]\n[4, 5, 6]\n")
    ok = batchkit.prediction_job("rules_a", [str(base / "two.json")], str(base / "rules-out"),
                                 modelName=f"{P}/models/tf", maxWorkerCount=1)
    jobs.create(parent=P, body={**ok, "labels": {"team": "ds"}}).execute()
    cases = [
        ({**ok}, 409, "Field: job.job_id Error: A job with the same name already exists."),
        ({**ok, "jobId": "1bad"}, 400, "Field: job.job_id Error: Job id must start with a letter"),
        ({**ok, "jobId": "c", "predictionInput": {**ok["predictionInput"], "dataFormat": "CSV"}},
         400, "Field: job.prediction_input.data_format Error: CSV is available only for output"),
        ({**ok, "jobId": "c", "predictionInput": {**ok["predictionInput"],
                                                  "outputDataFormat": "TF_RECORD"}}, 400,
         "Field: job.prediction_input.output_data_format Error: outputDataFormat TF_RECORD is "
         "available only for input data; use one of JSON, TEXT, CSV."),
        ({**ok, "jobId": "c", "predictionInput": {**ok["predictionInput"], "uri": "/x"}}, 400,
         "Field: job.prediction_input.model_version Error: Specify exactly one of"),
        ({**ok, "jobId": "c", "predictionInput": {**ok["predictionInput"],
                                                  "modelName": f"{P}/models/ghost"}},
         404, "Model projects/p/models/ghost not found."),
        ({"jobId": "c"}, 400, "Field: job.prediction_input Error: predictionInput is required"),
        ({**ok, "colour": "red"}, 400, 'Invalid JSON payload received. Unknown name "colour"'),
    ]
    for body, status, message in cases:
        with pytest.raises(HttpError) as failed:
            jobs.create(parent=P, body=body).execute()
        err = error_of(failed.value)
        assert (err["code"], err["message"][:len(message)]) == (status, message), err
    done = batchkit.wait_job(ml, f"{P}/jobs/rules_a")
    assert done["state"] == "SUCCEEDED" and done["labels"] == {"team": "ds"}
    patched = jobs.patch(name=f"{P}/jobs/rules_a", updateMask="labels",
                         body={"labels": {"team": "ml"}, "etag": done["etag"]}).execute()
    assert patched["labels"] == {"team": "ml"} and patched["etag"] != done["etag"]
    for body, mask, status in (({"labels": {}, "etag": done["etag"]}, "labels", 409),
                               ({"labels": {}}, "state", 400)):
        with pytest.raises(HttpError) as failed:
            jobs.patch(name=f"{P}/jobs/rules_a", updateMask=mask, body=body).execute()
        assert error_of(failed.value)["code"] == status
    with pytest.raises(HttpError) as failed:
        jobs.cancel(name=f"{P}/jobs/rules_a").execute()
    assert error_of(failed.value)["status"] == "FAILED_PRECONDITION"
    with pytest.raises(HttpError) as failed:
        jobs.get(name=f"{P}/jobs/ghost").execute()
    assert error_of(failed.value)["code"] == 404
    listed = jobs.list(parent=P, filter="labels.team = ml").execute()
    assert [j["jobId"] for j in listed["jobs"]] == ["rules_a"]
    first = jobs.list(parent=P, pageSize=1).execute()
    second = jobs.list(parent=P, pageSize=1, pageToken=first["nextPageToken"]).execute()
    assert first["jobs"][0]["jobId"] < second["jobs"][0]["jobId"]
