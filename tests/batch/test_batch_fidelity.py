"""Batch prediction output as the real service's pipeline wrote it (issue 34, items 4 and 5),
through a whole pipeline run (batch/launcher.Run, DirectRunner, one worker).

Sources: kubeflow/batch-predict, the pipeline AI Platform's batch prediction ran:
kubeflow_batch_predict/prediction/prediction_lib.py `rowify` (`output[row, ...].tolist()`,
then json.dumps: a float32 3.1 is written 3.0999999046325684) and
kubeflow_batch_predict/dataflow/batch_prediction.py PredictionDoFn.process (errors keyed by the
PredictionError's detail, counted per key).
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

from batch.launcher import Run
from batch.spec import JobSpec
from tests.kit import batchkit, modelkit

pytestmark = pytest.mark.slow


def _run(spec: JobSpec, workdir: Path) -> dict[str, object]:
    run = Run(spec, workdir)
    deadline = time.monotonic() + 300
    while not run.poll():
        assert time.monotonic() < deadline, "the pipeline did not finish"
        time.sleep(0.2)
    return run.result()


def test_float32_outputs_are_written_as_their_doubles(tmp_path: Path) -> None:
    from tests.kit import tfmodels

    model = tfmodels.half_plus_two(tmp_path / "model", b=3.0)  # y = x / 2 + 3, float32
    (tmp_path / "in.json").write_text("[0.2]\n[1.0]\n")
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(model),
                   framework="TENSORFLOW")
    assert _run(spec, tmp_path / "work") == {"predictions": 2, "errors": 0}
    lines = batchkit.shard_lines(batchkit.local_outputs(tmp_path / "out"), "prediction.results")
    # json.dumps of tolist(): the float32 nearest 3.1, as a double
    assert sorted(lines) == ['{"y": [3.0999999046325684]}', '{"y": [3.5]}']


def test_errors_are_keyed_by_the_errors_detail(tmp_path: Path) -> None:
    modelkit.sklearn_model(tmp_path / "model", features=3)
    (tmp_path / "in.json").write_text("[1.0, 2.0, 3.0]\n[1.0, 2.0]\n")
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   framework="SCIKIT_LEARN", batch_size=1)
    assert _run(spec, tmp_path / "work") == {"predictions": 1, "errors": 1}
    [line] = batchkit.shard_lines(batchkit.local_outputs(tmp_path / "out"),
                                  "prediction.errors_stats")
    message, count = ast.literal_eval(line)
    assert count == 1
    # prediction_lib's sklearn wording, once; not "Prediction failed: Prediction failed: ..."
    assert message.startswith("Exception during sklearn prediction: "), message
    assert "Prediction failed" not in message
    assert json.loads(batchkit.shard_lines(batchkit.local_outputs(tmp_path / "out"),
                                           "prediction.results")[0]) in (0, 1)


# -- item 7: an unreachable gs:// input fails the job promptly ---------------------------------

def test_bounded_calls() -> None:
    import threading

    from batch.sources import bounded

    assert bounded(lambda: 7, 5.0, "x") == 7
    with pytest.raises(KeyError):
        bounded(lambda: {}["k"], 5.0, "x")
    never = threading.Event()
    try:
        with pytest.raises(ValueError, match=r"^Cloud Storage \(gs://b/x\) did not answer within "
                                             r"0.01 seconds\. Check that the bucket exists"):
            bounded(never.wait, 0.01, "Cloud Storage (gs://b/x)")
    finally:
        never.set()


def test_unreachable_gs_input_fails_the_job_saying_why(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials and no Cloud Storage reachable (this machine has no network): Beam's
    client probes for credentials and retries for minutes; the job fails once the bound passes,
    naming the input and what to check."""
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    modelkit.sklearn_model(tmp_path / "model", features=3)
    spec = JobSpec(input_paths=["gs://mlemu-no-such-bucket/in-*.json"], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(tmp_path / "model"),
                   framework="SCIKIT_LEARN", storage_answer_s=2.0)
    outcome = _run(spec, tmp_path / "work")
    error = str(outcome["error"])
    assert error.startswith("Cannot read input path gs://mlemu-no-such-bucket/in-*.json: "), error


def test_a_job_that_cannot_run_says_why_once(tmp_path: Path) -> None:
    """A signature the model lacks fails the job in the model's words, said once (Beam rebuilds a
    DoFn's exception from its text, which made mlemu's error prefix its words twice)."""
    from tests.kit import tfmodels

    model = tfmodels.half_plus_two(tmp_path / "model")
    (tmp_path / "in.json").write_text("[1.0]\n")
    spec = JobSpec(input_paths=[str(tmp_path / "in.json")], data_format="JSON",
                   output_path=str(tmp_path / "out"), model_dir=str(model),
                   framework="TENSORFLOW", signature_name="nope")
    error = str(_run(spec, tmp_path / "work")["error"])
    assert error.startswith('Serving signature name: "nope" not found in signature def.'), error
    assert "Prediction failed" not in error and "while running" not in error
