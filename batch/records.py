"""One input record to one instance, and one prediction to one output line (no Beam here).

What the real service did (kubeflow/batch-predict, kubeflow_batch_predict/dataflow/
batch_prediction.py, PredictionDoFn.process, and prediction/tensorflow_lib.py):

- A record is a text line (JSON/TEXT) or a TFRecord record (TF_RECORD, TF_RECORD_GZIP). When the
  TensorFlow signature has exactly one input and it is a string tensor, the record is fed as is
  (e.g. a serialized tf.Example); otherwise it is parsed as one JSON instance, with `{"b64": ...}`
  for binary values as in online prediction.
- Each result line is `json.dumps(prediction)` of that one instance's prediction, and a
  TensorFlow prediction is always the object of every output alias of the signature (the library
  "rowifies" the outputs: `{"probabilities": [...], "logits": [...], "classes": 0}`, as in the
  census sample's `gsutil cat .../prediction.results-00000-of-00001`), even for a single output,
  where online prediction gives the bare value. Nothing else is added to the line: instance
  keys pass through only as the model itself forwards them (an output such as `key`).
- Failures go to `prediction.errors_stats-*` as `(error message, count)` pairs: the pipeline
  counts errors per message (beam.combiners.Count.PerKey) and WriteToText writes each pair's
  Python text form.
- outputDataFormat CSV ("Values are comma-separated rows, with keys in a separate file", the
  discovery document; the layout is batch_prediction_pipeline.py's `keys_to_csv`/
  `values_to_csv`): each prediction object is one `csv.DictWriter` row (lines end `\r\n`, as
  the csv module writes them; no newline added) in `prediction.results-SSSSS-of-NNNNN.csv`, and
  the keys of one sampled prediction are one `csv.writer` row in `prediction.results_header.csv`
  (WriteToText adds its newline after the row's `\r\n`). mlemu writes the keys sorted (the
  service took a Python 2 dict's order). A prediction that is not an object has no keys: the
  service's pipeline failed on it, and so does the job here, saying why.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

import predictors
from core import wirejson
from predictors import json_values
from predictors.base import Predictor

#: Longest record a job reads. Longer ones are skipped, never held (batch/sources.py reads past
#: them), and each counts as one error: a single 500 MB line once took a job's processes to
#: 17.5 GB. Sixteen times AI Platform's online request limit (1.5 MB) still fits a record.
MAX_RECORD_BYTES = 24 * 1024 * 1024
#: Longest error message a job keeps (the errors file counts messages; a model's exception text
#: may echo its whole input).
MAX_MESSAGE_CHARS = 1000


class Oversized(bytes):
    """Stands in a batch for a record longer than MAX_RECORD_BYTES: empty, with its size."""

    size: int

    def __new__(cls, size: int) -> Oversized:
        record = super().__new__(cls, b"")
        record.size = size
        return record

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as itself between Beam's stages
        return Oversized, (self.size,)


class Refused(bytes):
    """Stands in a batch for an input the job's reader could not make an instance of (a bad CSV
    row, a listed file that cannot be read): empty, with the reason, an error of its own."""

    message: str

    def __new__(cls, message: str) -> Refused:
        record = super().__new__(cls, b"")
        record.message = message
        return record

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as itself between Beam's stages
        return Refused, (self.message,)


def oversized_message(record: Oversized) -> str:
    return (f"The record is {record.size} bytes; batch prediction reads records of at most "
            f"{MAX_RECORD_BYTES} bytes.")


def short(message: str) -> str:
    """An error message as the errors file keeps it: at most MAX_MESSAGE_CHARS characters."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}... ({len(message)} characters in all)"


class Decoder:
    """How a job turns its records into instances, fixed once the model is loaded."""

    def __init__(self, predictor: Predictor, signature_name: str, built: bool = False,
                 online: bool = False) -> None:
        """`built`: the records are JSON instances the job's reader made (Vertex AI's csv,
        file-list and tf-record inputs), never fed to a model as they are. `online`: each
        record is a JSON instance and each prediction is what online prediction answers for it
        (a Vertex AI job: its model server's `predictions`, so a TensorFlow signature with one
        output gives the bare value), not the service's rowified batch form."""
        self.raw = False
        self.output_names: list[str] = []
        if predictor.framework == predictors.TENSORFLOW and not online:
            # TensorFlowPredictor.select: the signature predict will run (same rules).
            select: Any = getattr(predictor, "select", None)
            sig = select(signature_name or None)
            inputs = list(sig.inputs.values())
            self.raw = not built and len(inputs) == 1 and inputs[0].dtype_name == "DT_STRING"
            self.output_names = sorted(sig.outputs)

    def instance(self, record: str | bytes) -> Any:
        """The instance a record stands for; ValueError if it is not valid JSON (or too long)."""
        if isinstance(record, Oversized):
            raise ValueError(oversized_message(record))
        if isinstance(record, Refused):
            raise ValueError(record.message)
        if self.raw:
            if isinstance(record, bytes):
                try:
                    return record.decode("utf-8")
                except UnicodeDecodeError:
                    return {"b64": base64.b64encode(record).decode()}
            return record
        try:
            return wirejson.loads(record)
        except ValueError as exc:
            text = record[:100] if isinstance(record, str) else \
                record[:100].decode("utf-8", "replace")
            raise ValueError(f"Failed to parse the instance as JSON: {exc}: {text}") from None

    def instances(self, records: list[bytes]) -> tuple[list[Any], list[str]]:
        """The instances of a batch of records, and the errors of those that are not valid.
        All at once through orjson when every record decodes (a job's usual case), else record
        by record to name the bad ones or take what orjson refuses and the standard library
        reads (NaN: wirejson.loads, the decoder of online prediction, so a record means what
        the same instance means to :predict)."""
        if not self.raw:
            try:
                return list(map(orjson.loads, records)), []
            except orjson.JSONDecodeError:  # which ones, and why: below
                pass
        instances, bad = [], []
        for record in records:
            try:
                instances.append(self.instance(record))
            except ValueError as exc:
                bad.append(short(str(exc)))
        return instances, bad

    def predict(self, predictor: Predictor, instances: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        """One JSON-ready prediction per instance. A TensorFlow signature's outputs are rowified
        as the service's library did (prediction_lib.py `rowify`: `output[row, ...].tolist()`),
        so a float32 3.1 is the double 3.0999999046325684 in the results, not online
        prediction's shortest form."""
        outputs: Any = getattr(predictor, "predict_outputs", None)
        if self.output_names and callable(outputs):
            return rowify(outputs(instances, **kwargs))
        return self.rows(predictor.predict(instances, **kwargs), len(instances))

    def rows(self, predictions: Any, count: int) -> list[Any]:
        """One JSON-ready prediction per instance, in the service's batch output form."""
        if not isinstance(predictions, Sequence) or isinstance(predictions, (str, bytes)) or \
                len(predictions) != count:
            raise ValueError(f"The model returned {_length(predictions)} predictions for "
                             f"{count} instances.")
        if len(self.output_names) == 1:
            name = self.output_names[0]
            return [p if isinstance(p, dict) and set(p) == {name} else {name: p}
                    for p in predictions]
        return list(predictions)


def rowify(outputs: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Output arrays as one object of every output per instance: numbers by `tolist()` (the
    double of each float32), strings as online prediction gives them (text, or b64)."""
    size = json_values.batch_size(outputs)
    columns = {name: json_values.json_value(array, name) if array.dtype.kind in "OSU"
               else array.tolist() for name, array in sorted(outputs.items())}
    return [{name: column[row] for name, column in columns.items()} for row in range(size)]


def _length(value: Any) -> str:
    try:
        return str(len(value))
    except TypeError:
        return "no list of"


#: Prediction types whose JSON text never contains ", " (exact types: a subclass such as
#: numpy.float64 may encode otherwise, so it takes the per-line way).
_PLAIN_SCALARS = frozenset({int, float, bool, type(None)})


def result_lines(predictions: list[Any]) -> str:
    """The result lines of a batch, one `json.dumps(prediction)` each, joined by newlines."""
    # json.dumps' defaults are the service's separators (", ", ": "); passing no options keeps
    # the module's cached encoder (any option builds a new JSONEncoder per call).
    if _PLAIN_SCALARS.issuperset(map(type, predictions)):
        # A classifier's labels or a regressor's values: one encoder call for the whole list
        # gives each item's json.dumps text between ", " separators, which no such item's text
        # contains, so the lines are the same bytes at a tenth of the cost per prediction.
        return json.dumps(predictions)[1:-1].replace(", ", "\n")
    return "\n".join(map(json.dumps, predictions))


def errors_line(message: str, count: int) -> str:
    """A `prediction.errors_stats` line: the text of the (message, count) pair Beam wrote."""
    return str((message, count))


def csv_keys(prediction: Any) -> list[str]:
    """The CSV columns of a prediction object (sorted); ValueError for any other prediction."""
    if not isinstance(prediction, dict):
        raise ValueError("outputDataFormat CSV writes each prediction's keys in a header file and "
                         "its values in rows, so every prediction must be an object of named "
                         f"outputs; this model returned {type(prediction).__name__} predictions. "
                         "Use outputDataFormat JSON.")
    return sorted(prediction)


def csv_row(values: Any, keys: list[str] | None = None) -> str:
    """One CSV row ending in \\r\\n: the prediction object's values in `keys` order (a key it
    lacks is empty; one not in `keys` is a ValueError, as csv.DictWriter has it), or with `keys`
    None, `values` itself (the header's keys)."""
    out = io.StringIO()
    if keys is None:
        csv.writer(out).writerow(values)
    else:
        csv.DictWriter(out, keys).writerow(values)
    return out.getvalue()
