"""Vertex AI batch prediction from `csv`, `file-list` and `tf-record` inputs through Google's own
SDK (google-cloud-aiplatform's REST transport, `BatchPredictionJob.create(..., sync=True)`)
against a live server, inputs and outputs in a real Cloud Storage emulator: each CSV row an array
instance (quoted strings, unquoted numbers), bad rows in errors_00000.jsonl; each listed file and
each TFRecord record a `{"b64": ...}` instance for a Custom Prediction Routine, files outside
MLEMU_DATA_ROOTS refused; an `instanceConfig` (keyField, includedFields, excludedFields,
instanceType) through aiplatform_v1's JobServiceClient, for jsonl and csv.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.kit import modelkit, vertexkit

pytestmark = pytest.mark.slow
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest"
BUCKET = "vertex-inputs"
ROUTINE = '''
import base64
import hashlib


class Sizes:
    """A Custom Prediction Routine for file-list jobs: each {"b64": ...} instance's file's size
    and digest."""

    def load(self, artifacts_uri):
        pass

    def preprocess(self, prediction_input):
        return [base64.b64decode(i["b64"]) for i in prediction_input["instances"]]

    def predict(self, instances):
        return [{"bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for d in instances]

    def postprocess(self, prediction_results):
        return {"predictions": prediction_results}
'''


@pytest.fixture(scope="module")
def env(gcs_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("vertex-inputs")
    data = base / "data"
    data.mkdir()
    with vertexkit.sdk_server(gcs_emulator, base, BUCKET,
                              {"MLEMU_DATA_ROOTS": str(data)}) as (_server, aiplatform):
        yield {"aiplatform": aiplatform, "base": base, "data": data,
               "bucket": gcs_emulator.client().bucket(BUCKET)}


def _outputs(bucket: Any, job: Any) -> dict[str, list[Any]]:
    directory = job.output_info.gcs_output_directory
    prefix = directory.removeprefix(f"gs://{BUCKET}/")
    return {blob.name.removeprefix(prefix + "/"): [
        json.loads(line) for line in blob.download_as_text().splitlines()]
        for blob in bucket.list_blobs(prefix=prefix + "/")}


def test_csv_rows_are_array_instances_and_bad_rows_are_errors(env: dict[str, Any]) -> None:
    aiplatform, bucket = env["aiplatform"], env["bucket"]
    model_dir = env["base"] / "linreg"
    fitted = modelkit.sklearn_model(model_dir, kind="linreg", seed=1)
    bucket.blob("csv/rows.csv").upload_from_string(
        '"sepal_length","sepal_width","petal_length","petal_width"\r\n'
        "5.1,3.5,1.4,0.2\r\n"
        "6.7,3.0\r\n"  # two values for four columns
        '"5.9","3.0","5.1","1.8"\r\n'  # quoted: strings, which this model cannot take
        "-1,0.5,2e0,-0.3\r\n")
    bucket.blob("csv/header-only.csv").upload_from_string('"a","b","c","d"\n')
    model = aiplatform.Model.upload(display_name="rows", artifact_uri=str(model_dir),
                                    serving_container_image_uri=IMAGE)
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="csv", model_name=model.resource_name, instances_format="csv",
        gcs_source=[f"gs://{BUCKET}/csv/rows.csv", f"gs://{BUCKET}/csv/header-only.csv"],
        gcs_destination_prefix=f"gs://{BUCKET}/csv/out", sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert (job.completion_stats.successful_count, job.completion_stats.failed_count) == (2, 2)
    files = _outputs(bucket, job)
    assert sorted(files) == ["errors_00000.jsonl", "predictions_00000.jsonl"]
    rows = [[5.1, 3.5, 1.4, 0.2], [-1.0, 0.5, 2.0, -0.3]]
    predictions = files["predictions_00000.jsonl"]
    assert [p["instance"] for p in predictions] == rows
    assert [p["prediction"] for p in predictions] == pytest.approx(
        np.asarray(fitted.predict(np.asarray(rows))).tolist())
    bad_row, strings = files["errors_00000.jsonl"]
    assert bad_row == {"instance": None, "error": {
        "status": "INVALID_ARGUMENT", "message": "CSV row 2 is not a valid instance: the row has "
                                                 "2 values but the header has 4: 6.7,3.0"}}
    assert strings["instance"] == ["5.9", "3.0", "5.1", "1.8"]
    assert strings["error"]["message"].startswith("Prediction failed")
    job.delete()
    model.delete()


def test_listed_files_are_b64_instances(env: dict[str, Any], tmp_path: Path) -> None:
    aiplatform, bucket, data = env["aiplatform"], env["bucket"], env["data"]
    blobs = {"files/a.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "files/b.txt": b"hello"}
    for name, content in blobs.items():
        bucket.blob(name).upload_from_string(content)
    (data / "local.bin").write_bytes(b"\x00local")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not yours")
    listed = [f"gs://{BUCKET}/files/a.png", f"gs://{BUCKET}/files/b.txt", "",
              str(data / "local.bin"), str(outside), f"gs://{BUCKET}/files/missing.bin"]
    bucket.blob("lists/files.txt").upload_from_string("\n".join(listed) + "\n")
    model = _routine_model(aiplatform, env["base"])
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="files", model_name=model.resource_name, instances_format="file-list",
        gcs_source=f"gs://{BUCKET}/lists/files.txt",
        gcs_destination_prefix=f"gs://{BUCKET}/files/out", sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert (job.completion_stats.successful_count, job.completion_stats.failed_count) == (3, 2)
    files = _outputs(bucket, job)
    contents = [*blobs.values(), b"\x00local"]
    assert files["predictions_00000.jsonl"] == [
        {"instance": {"b64": base64.b64encode(c).decode()},
         "prediction": {"bytes": len(c), "sha256": hashlib.sha256(c).hexdigest()}}
        for c in contents]
    refused, missing = files["errors_00000.jsonl"]
    assert refused == {"instance": None, "error": {"status": "INVALID_ARGUMENT", "message": (
        f"{outside} is not allowed: batch prediction data must be under a directory this server "
        "keeps job data in (MLEMU_DATA_ROOTS).")}}
    assert missing["instance"] is None and missing["error"]["message"].startswith(
        f"gs://{BUCKET}/files/missing.bin cannot be read: ")
    job.delete()
    model.delete()


def test_tfrecords_are_b64_instances(env: dict[str, Any]) -> None:
    """Each TFRecord record is sent as `{"b64": ...}` whatever it holds (JSON text too), the
    instance of its output line; written by TensorFlow's own writer, as a user would."""
    import tensorflow as tf

    aiplatform, bucket = env["aiplatform"], env["bucket"]
    datas = [b'{"not": "parsed"}', tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5, 2.0]))}))
        .SerializeToString(), b"\x00\xffraw"]
    path = env["base"] / "records.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for data in datas:
            writer.write(data)
    bucket.blob("tfrecords/in.tfrecord").upload_from_filename(str(path))
    model = _routine_model(aiplatform, env["base"])
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="records", model_name=model.resource_name, instances_format="tf-record",
        gcs_source=f"gs://{BUCKET}/tfrecords/in.tfrecord",
        gcs_destination_prefix=f"gs://{BUCKET}/tfrecords/out", sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert (job.completion_stats.successful_count, job.completion_stats.failed_count) == (3, 0)
    files = _outputs(bucket, job)
    assert files["predictions_00000.jsonl"] == [
        {"instance": {"b64": base64.b64encode(d).decode()},
         "prediction": {"bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()}}
        for d in datas]
    assert files["errors_00000.jsonl"] == []
    job.delete()
    model.delete()

    # A TensorFlow model whose one input is a string tensor takes the records' bytes: here
    # serialized tf.train.Examples it parses, in a tf-record-gzip file.
    class Parse(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, examples: Any) -> dict[str, Any]:
            x = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([2], tf.float32)})["x"]
            return {"total": tf.reduce_sum(x, axis=1)}

    parse = Parse()
    tf.saved_model.save(parse, str(env["base"] / "parse"), signatures={"serving_default": parse.serve})
    pairs = [[1.5, 2.0], [-4.0, 0.25]]
    path = env["base"] / "examples.tfrecord.gz"
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for pair in pairs:
            writer.write(tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
                float_list=tf.train.FloatList(value=pair))})).SerializeToString())
    bucket.blob("tfrecords/examples.gz").upload_from_filename(str(path))
    model = aiplatform.Model.upload(
        display_name="parse", artifact_uri=str(env["base"] / "parse"),
        serving_container_image_uri="us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest")
    job = aiplatform.BatchPredictionJob.create(
        job_display_name="examples", model_name=model.resource_name,
        instances_format="tf-record-gzip", gcs_source=f"gs://{BUCKET}/tfrecords/examples.gz",
        gcs_destination_prefix=f"gs://{BUCKET}/tfrecords/tf-out", sync=True)
    assert job.state.name == "JOB_STATE_SUCCEEDED", job.error
    lines = _outputs(bucket, job)["predictions_00000.jsonl"]
    # One output: the bare value, as online prediction (TF Serving's row format) answers.
    assert [line["prediction"] for line in lines] == [3.5, -3.75], lines
    job.delete()
    model.delete()


def _routine_model(aiplatform: Any, base: Path) -> Any:
    routine = base / "routine"
    routine.mkdir(exist_ok=True)
    (routine / "sizes_routine.py").write_text(ROUTINE)
    return aiplatform.Model.upload(
        display_name="sizes", artifact_uri=str(routine),
        serving_container_image_uri="us-docker.pkg.dev/me/sizes:1",
        serving_container_environment_variables={"MLEMU_PREDICTOR_CLASS": "sizes_routine.Sizes"})


def _run_job(aiplatform: Any, client: Any, job: Any) -> Any:
    """Create a job through JobServiceClient (the SDK's BatchPredictionJob.create has no
    instance_config) and wait for its end (a generous bound, never a target)."""
    created = client.create_batch_prediction_job(
        parent="projects/demo/locations/us-central1", batch_prediction_job=job)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        got = client.get_batch_prediction_job(name=created.name)
        if got.state.name in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            return got
        time.sleep(0.5)
    raise AssertionError(f"{created.name} did not end")


def test_instance_config_key_and_fields(env: dict[str, Any]) -> None:
    """instanceConfig through google.cloud.aiplatform_v1's JobServiceClient (REST): jsonl
    objects sent as arrays of includedFields with the key in the output line; csv rows with a
    key column and an excluded one."""
    from google.cloud import aiplatform_v1

    aiplatform, bucket = env["aiplatform"], env["bucket"]
    model_dir = env["base"] / "keyed"
    fitted = modelkit.sklearn_model(model_dir, kind="linreg", seed=2)
    model = aiplatform.Model.upload(display_name="keyed", artifact_uri=str(model_dir),
                                    serving_container_image_uri=IMAGE)
    client = aiplatform.initializer.global_config.create_client(
        client_class=aiplatform.utils.JobClientWithOverride)
    rows = {"a": [5.1, 3.5, 1.4, 0.2], "b": [-1.0, 0.5, 2.0, -0.3]}
    names = ["sl", "sw", "pl", "pw"]
    bucket.blob("keyed/in.jsonl").upload_from_string("".join(
        json.dumps({"note": "n", **dict(zip(reversed(names), reversed(v))), "id": k}) + "\n"
        for k, v in rows.items()) + '{"sl": 1, "sw": 2, "pl": 3, "pw": 4}\n')
    bucket.blob("keyed/in.csv").upload_from_string('"id","sl","sw","drop","pl","pw"\n' + "".join(
        f'"{k}",{v[0]},{v[1]},"x",{v[2]},{v[3]}\n' for k, v in rows.items()))
    expected = np.asarray(fitted.predict(np.asarray(list(rows.values())))).tolist()
    for fmt, config in (("jsonl", aiplatform_v1.BatchPredictionJob.InstanceConfig(
            instance_type="array", key_field="id", included_fields=names)),
                        ("csv", aiplatform_v1.BatchPredictionJob.InstanceConfig(
                            key_field="id", excluded_fields=["drop"]))):
        job = _run_job(aiplatform, client, aiplatform_v1.BatchPredictionJob(
            display_name=f"keyed-{fmt}", model=model.resource_name, instance_config=config,
            input_config=aiplatform_v1.BatchPredictionJob.InputConfig(
                instances_format=fmt, gcs_source=aiplatform_v1.GcsSource(
                    uris=[f"gs://{BUCKET}/keyed/in.{fmt}"])),
            output_config=aiplatform_v1.BatchPredictionJob.OutputConfig(
                predictions_format="jsonl", gcs_destination=aiplatform_v1.GcsDestination(
                    output_uri_prefix=f"gs://{BUCKET}/keyed/out-{fmt}"))))
        assert job.state.name == "JOB_STATE_SUCCEEDED", job.error
        assert job.instance_config == config
        files = _outputs(bucket, aiplatform.BatchPredictionJob(job.name))
        predictions = files["predictions_00000.jsonl"]
        assert [p["key"] for p in predictions] == ["a", "b"]
        assert all("instance" not in p for p in predictions)
        assert [p["prediction"] for p in predictions] == pytest.approx(expected)
        if fmt == "jsonl":  # the line without its key is its own error
            assert files["errors_00000.jsonl"] == [{
                "instance": {"sl": 1, "sw": 2, "pl": 3, "pw": 4},
                "error": {"status": "INVALID_ARGUMENT",
                          "message": 'The instance has no key field "id".'}}]
    model.delete()
