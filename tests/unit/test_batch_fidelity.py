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
from tests import batchkit, modelkit

pytestmark = pytest.mark.slow


def _run(spec: JobSpec, workdir: Path) -> dict[str, object]:
    run = Run(spec, workdir)
    deadline = time.monotonic() + 300
    while not run.poll():
        assert time.monotonic() < deadline, "the pipeline did not finish"
        time.sleep(0.2)
    return run.result()


def test_float32_outputs_are_written_as_their_doubles(tmp_path: Path) -> None:
    from tests import tfmodels

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
