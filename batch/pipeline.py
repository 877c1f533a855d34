"""The batch prediction pipeline, on Apache Beam (imported only here, in the pipeline's process).

  input ranges (batch/sources.py: the inputPaths' files, text files split by bytes; Create's
                own Reshuffle spreads them over the workers)
  -> ReadBatchesDoFn (a range's records, ~RECORDS_PER_ELEMENT at a time in whole batches of
                     `batchSize`: JSON/TEXT lines, TFRecords; Vertex AI's CSV rows and listed
                     files as JSON instances, batch/vertex_inputs.py)
  -> PredictDoFn (the model loads once per worker, in setup, and predicts `batchSize` records a
                  call; one element of lines per element of records)
  -> results: WriteToText(outputPath/prediction.results, shards -SSSSS-of-NNNNN)
              (outputDataFormat CSV: rows in -SSSSS-of-NNNNN.csv shards, and each worker's
              column keys -> Sample one -> WriteToText(prediction.results_header.csv))
  -> errors:  Count.PerElement(message) -> WriteToText(outputPath/prediction.errors_stats)
  (a Vertex AI job, JobSpec.layout "vertex": {"instance", "prediction"} lines in
   predictions_SSSSS.jsonl, {"instance", "error"} lines in errors_SSSSS.jsonl)

Every stage of a job's records is fused: a worker reads its ranges, predicts and writes its own
shard; only ranges, shard names, error messages and counts pass through the runner.

The graph follows the real service's (kubeflow/batch-predict, kubeflow_batch_predict/dataflow/
batch_prediction_pipeline.py: every pattern read, batches of batchSize records, results as JSON
lines, errors counted per message), except that records are read and batched in one step
(batch/sources.py says why), and one more deliberate difference: a failed batch is retried
instance by instance, so only the bad instances are counted as errors (the real service lost
the whole batch of `batchSize` instances to one bad line).
"""

from __future__ import annotations

import os
import posixpath
import shlex
import tempfile
from typing import Any

import apache_beam as beam

from batch import records, sources, vertex_inputs, vertex_records
from batch.engine import anonymous_gcs, options, runner
from batch.forkserver import ForkServer
from batch.spec import (
    CSV_SUFFIX,
    ERRORS_BASENAME,
    HEADER_SUFFIX,
    RESULTS_BASENAME,
    JobSpec,
)

NAMESPACE = "mlemu_batch_predict"
ERRORS = "errors"
KEYS = "keys"


def load_predictor(spec: JobSpec) -> Any:
    """The job's predictor, through the same code as online prediction (predictors.load)."""
    import predictors
    from registry import artifacts
    from registry.gcs import GcsCache

    gcs = None
    if any(artifacts.is_remote(u) for u in (spec.model_dir, *spec.package_uris)):
        gcs = GcsCache(tempfile.mkdtemp(prefix="mlemu-batch-gcs-"),  # type: ignore[arg-type]
                       spec.storage_emulator_host or None)
    model_dir = artifacts.resolve_model_dir(spec.model_dir, gcs)
    cache = tempfile.mkdtemp(prefix="mlemu-batch-packages-")
    roots = [artifacts.unpack_package(artifacts.resolve_uri(u, gcs=gcs), cache)  # type: ignore[arg-type]
             for u in spec.package_uris]
    predictor, _ = predictors.load(model_dir, spec.framework or None,
                                   spec.prediction_class or None, roots)
    return predictor


#: Records per element between the reading and the predicting step: whole model batches of
#: `batchSize`, about this many in all. Beam's cost per element (bench/NOTES.md) is then paid
#: per element of many records rather than per model call.
RECORDS_PER_ELEMENT = 1024


class ReadBatchesDoFn(beam.DoFn):  # type: ignore[misc]
    """An input range in; lists of records out, each a whole number of model batches."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec

    def process(self, rng: sources.Range) -> Any:
        size = self.spec.batch_size * max(1, RECORDS_PER_ELEMENT // self.spec.batch_size)
        yield from vertex_inputs.batches(self.spec, rng, size)


class PredictDoFn(beam.DoFn):  # type: ignore[misc]
    """Lists of records in, predicted `batchSize` at a time; their result lines (one string) out,
    error messages tagged ERRORS."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.predicted = beam.metrics.Metrics.counter(NAMESPACE, "predictions")
        self.failed = beam.metrics.Metrics.counter(NAMESPACE, "errors")

    def setup(self) -> None:
        if self.spec.storage_emulator_host:
            anonymous_gcs()  # this worker's own GCS client (multi-processing runs many)
        try:
            self.predictor = load_predictor(self.spec)
            self.decoder = records.Decoder(self.predictor, self.spec.signature_name,
                                           built=self.spec.built_records,
                                           online=self.spec.layout == "vertex")
            self.instances = vertex_inputs.instance_config(self.spec)
        except Exception as exc:  # noqa: BLE001 - the job fails saying why, once
            # Beam re-raises a DoFn's exception as a new one of its type built from its text;
            # an mlemu error would prefix its words again ("Prediction failed: Prediction
            # failed: ..."), so the job's reason travels as a plain exception.
            raise JobFailure(_message(exc)) from None
        self.kwargs = {"signature_name": self.spec.signature_name} \
            if self.spec.signature_name else {}
        self.csv_keys: list[str] | None = None  # outputDataFormat CSV: fixed by the first row
        # One short O_APPEND write per batch: atomic between worker processes.
        self.progress = os.open(self.spec.progress_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                0o644) if self.spec.progress_path else None

    def _predict(self, instances: list[Any]) -> list[Any]:
        return self.decoder.predict(self.predictor, instances, self.kwargs)

    def _batch(self, batch: list[bytes], rows: list[Any], bad: list[str]) -> None:
        """One model call's records: their predictions onto `rows`, their errors onto `bad`."""
        instances, failed = self.decoder.instances(batch)
        try:
            done = self._predict(instances) if instances else []
        except Exception:  # noqa: BLE001 - find the bad instances one by one
            done = []
            for instance in instances:
                try:
                    done += self._predict([instance])
                except Exception as exc:  # noqa: BLE001 - the message goes to errors_stats
                    failed.append(_message(exc))
        rows += done
        bad += failed
        if self.progress is not None:
            os.write(self.progress, f"{len(done)} {len(failed)}\n".encode())

    def _vertex_batch(self, batch: list[bytes]) -> tuple[list[str], list[str], int]:
        """One model call's records, Vertex AI's way: (result lines, error lines, predictions)."""
        lines, bad, predicted = vertex_records.predict_batch(self.decoder, self._predict, batch,
                                                             self.instances)
        if self.progress is not None:
            os.write(self.progress, f"{predicted} {len(bad)}\n".encode())
        self.predicted.inc(predicted)
        self.failed.inc(len(bad))
        return lines, bad, predicted

    def _vertex(self, element: list[bytes]) -> Any:
        size = self.spec.batch_size
        for start in range(0, len(element), size):
            lines, bad, _ = self._vertex_batch(element[start:start + size])
            if lines:
                yield "\n".join(lines)
            for line in bad:
                yield beam.pvalue.TaggedOutput(ERRORS, line)

    def process(self, element: list[bytes]) -> Any:
        if self.spec.layout == "vertex":
            yield from self._vertex(element)
            return
        rows: list[Any] = []
        bad: list[str] = []
        size = self.spec.batch_size
        for start in range(0, len(element), size):
            self._batch(element[start:start + size], rows, bad)
        self.predicted.inc(len(rows))
        self.failed.inc(len(bad))
        if rows and self.spec.output_format == "CSV":
            yield from self._csv(rows)
        elif rows:  # WriteToText ends it with a newline: one line per prediction
            yield records.result_lines(rows)
        for message in bad:
            yield beam.pvalue.TaggedOutput(ERRORS, message)

    def _csv(self, rows: list[Any]) -> Any:
        if self.csv_keys is None:
            self.csv_keys = records.csv_keys(rows[0])
            yield beam.pvalue.TaggedOutput(KEYS, self.csv_keys)
        for row in rows:
            records.csv_keys(row)  # each one an object
        yield "".join(records.csv_row(row, self.csv_keys) for row in rows)

    def teardown(self) -> None:
        progress = getattr(self, "progress", None)
        if progress is not None:
            os.close(progress)
        predictor = getattr(self, "predictor", None)
        if predictor is not None:
            predictor.close()


class JobFailure(Exception):
    """Why a job's workers cannot run (its model does not load, its signature is missing)."""


def _message(exc: Exception) -> str:
    """The errors_stats key of a failed prediction: the error's detail, as the service's pipeline
    keyed them (kubeflow/batch-predict batch_prediction.py, PredictDoFn.process: the
    PredictionError's `error_detail`, e.g. "Exception during sklearn prediction: ...")."""
    detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
    return records.short(str(detail) or type(exc).__name__)


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def build(pipeline: beam.Pipeline, spec: JobSpec) -> None:
    ranges = sources.expand([_local(p) for p in spec.input_paths], spec.data_format, spec.workers,
                            spec.data_roots, spec.storage_answer_s)
    # Create reshuffles more than one element (its MaybeReshuffle): that spreads the ranges (not
    # records) over the workers; a Reshuffle of our own would only add a stage.
    outputs = (pipeline | "Input ranges" >> beam.Create(ranges, reshuffle=True)
               | "Read" >> beam.ParDo(ReadBatchesDoFn(spec))
               | "Predict" >> beam.ParDo(PredictDoFn(spec)).with_outputs(
                   ERRORS, KEYS, main="results"))
    out = _local(spec.output_path)
    if "://" not in out and spec.data_roots is not None and \
            not sources.within(os.path.realpath(out), spec.data_roots):
        # Checked when the job was made; a symlink on the way may have changed since.
        raise ValueError(f"Output path {spec.output_path} is outside the directories this server "
                         "keeps job data in (MLEMU_DATA_ROOTS).")
    join = posixpath.join if "://" in out else os.path.join
    if spec.layout == "vertex":  # predictions_00000.jsonl, errors_00000.jsonl (vertex_records)
        for name, lines in (("results", outputs.results), ("errors", outputs[ERRORS])):
            prefix = vertex_records.PREDICTIONS if name == "results" else vertex_records.ERRORS
            _ = lines | f"Write {name}" >> beam.io.WriteToText(
                join(out, prefix), shard_name_template=vertex_records.SHARD_TEMPLATE,
                file_name_suffix=vertex_records.SUFFIX)
        return
    results = join(out, RESULTS_BASENAME)
    if spec.output_format == "CSV":
        _ = outputs.results | "Write results" >> beam.io.WriteToText(
            results, file_name_suffix=CSV_SUFFIX, append_trailing_newlines=False)
        _ = (outputs[KEYS] | "Sample keys" >> beam.combiners.Sample.FixedSizeGlobally(1)
             | "Keys to CSV" >> beam.Map(lambda sample: records.csv_row(sample[0] if sample else []))
             | "Write keys" >> beam.io.WriteToText(results, file_name_suffix=HEADER_SUFFIX,
                                                   shard_name_template=""))
    else:
        _ = outputs.results | "Write results" >> beam.io.WriteToText(results)
    _ = (outputs[ERRORS] | "Count errors" >> beam.combiners.Count.PerElement()
         | "Format errors" >> beam.MapTuple(records.errors_line)
         | "Write errors" >> beam.io.WriteToText(join(out, ERRORS_BASENAME)))


def run(spec: JobSpec, forks: ForkServer | None = None) -> dict[str, int]:
    """Run the pipeline to the end; the counts of predictions and errors. `forks`: the fork
    server of the job's DirectRunner workers (batch/forkserver.py), for forked workers."""
    opts = options(spec)
    engine, server = runner(spec, opts, forks)
    try:
        pipeline = beam.Pipeline(runner=engine, options=opts)
        build(pipeline, spec)
        result = pipeline.run()
        result.wait_until_finish()
    finally:
        if forks is not None:
            forks.finished = True  # the workers may end now
        if server is not None:
            server.stop(None)
    counts = {"predictions": 0, "errors": 0}
    for metric in result.metrics().query(beam.metrics.MetricsFilter().with_namespace(NAMESPACE))[
            "counters"]:
        counts[metric.key.metric.name] += int(metric.committed or metric.attempted or 0)
    return counts


def split_options(text: str) -> list[str]:
    return shlex.split(text)
