"""The batch prediction job on Beam's DaskRunner (a `dask.distributed` cluster): the same work as
batch/pipeline.py's graph, in the one shape that runner executes correctly.

Beam 2.77's DaskRunner (apache_beam/runners/dask/dask_runner.py, transform_evaluator.py) cannot
run pipeline.py's graph as it is:
- it computes only the last transform's bag ("we can get away with computing just the last
  value", DaskRunner.run_pipeline), so of a graph with two sinks (results and errors) one is
  never written;
- a ParDo's tagged outputs are not routed: every output of a DoFn goes to every consumer
  (get_windowed_value drops the TaggedOutput), so results and error messages would mix;
- its result has no metrics (DaskRunnerResult.metrics raises NotImplementedError), which is how
  pipeline.py counts predictions and errors;
- a side input is materialized with `list(bag)` inside the consuming task, which for
  WriteToText's finalizing step recomputes the predictions there.
So here the graph is one chain, Create -> ParDo, which the runner translates to one dask bag
task per input range: each task reads its range, predicts (PredictDoFn's code) and writes its own
shard (`prediction.results-SSSSS-of-NNNNN`, one per range, written whole by one task, so a
retried task rewrites the same file), and returns a summary (counts, error messages, CSV keys).
The job's process gathers the summaries from the result's futures and writes the errors file
(and the CSV header) itself, so the output is the one pipeline.py writes. A Vertex AI job
(JobSpec.layout "vertex") is the same chain: each task writes its range's
`predictions_SSSSS.jsonl` and `errors_SSSSS.jsonl` (batch/vertex_records.py's names and lines,
through PredictDoFn's code), and the summaries give only the counts.
"""

from __future__ import annotations

import collections
import os
import posixpath
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.utils.windowed_value import WindowedValue

from batch import records, sources, vertex_inputs
from batch.engine import options
from batch.pipeline import PredictDoFn
from batch.spec import CSV_SUFFIX, ERRORS_BASENAME, HEADER_SUFFIX, RESULTS_BASENAME, JobSpec
from batch.vertex_records import ERRORS as VERTEX_ERRORS
from batch.vertex_records import PREDICTIONS, SUFFIX, shard_name


def _join(out: str, name: str) -> str:
    return posixpath.join(out, name) if "://" in out else os.path.join(out, name)


def shard_path(spec: JobSpec, index: int, shards: int) -> str:
    suffix = CSV_SUFFIX if spec.output_format == "CSV" else ""
    return _join(spec.output_path, f"{RESULTS_BASENAME}-{index:05d}-of-{shards:05d}{suffix}")


class ShardDoFn(PredictDoFn):
    """(index, input range) in; that range's results written to shard `index`; a summary out:
    {"predictions": N, "errors": {message: count}, "keys": CSV keys or None}."""

    def __init__(self, spec: JobSpec, shards: int) -> None:
        super().__init__(spec)
        self.shards = shards

    def setup(self) -> None:
        if self.spec.storage_emulator_host:  # Beam's own GCS client (the shard's writer) too
            os.environ.setdefault("STORAGE_EMULATOR_HOST", self.spec.storage_emulator_host)
        super().setup()

    def process(self, element: tuple[int, sources.Range]) -> Any:  # type: ignore[override]
        if self.spec.layout == "vertex":
            yield self._vertex_shard(*element)
            return
        index, rng = element
        count, keys = 0, None
        bad: list[str] = []
        with FileSystems.create(shard_path(self.spec, index, self.shards)) as out:
            for batch in vertex_inputs.batches(self.spec, rng, self.spec.batch_size):
                rows: list[Any] = []
                self._batch(batch, rows, bad)
                if not rows:
                    continue
                count += len(rows)
                if self.spec.output_format == "CSV":
                    keys = keys or records.csv_keys(rows[0])
                    for row in rows:
                        records.csv_keys(row)  # each one an object
                    out.write("".join(records.csv_row(row, keys) for row in rows).encode())
                else:
                    out.write(records.result_lines(rows).encode() + b"\n")
        yield {"predictions": count, "errors": dict(collections.Counter(bad)), "keys": keys}

    def _vertex_shard(self, index: int, rng: sources.Range) -> dict[str, Any]:
        """A Vertex AI job's range: its prediction and error lines written to its own
        predictions_/errors_ shard `index` (vertex_records.py's names, PredictDoFn's lines)."""
        count = failed = 0
        out_dir = self.spec.output_path
        with FileSystems.create(_join(out_dir, shard_name(PREDICTIONS, index))) as out, \
                FileSystems.create(_join(out_dir, shard_name(VERTEX_ERRORS, index))) as errors:
            for batch in vertex_inputs.batches(self.spec, rng, self.spec.batch_size):
                lines, bad, predicted = self._vertex_batch(batch)
                count += predicted
                failed += len(bad)
                for written, file in ((lines, out), (bad, errors)):
                    if written:
                        file.write("\n".join(written).encode() + b"\n")
        return {"predictions": count, "errors": {}, "failed": failed, "keys": None}


def _summaries(result: Any) -> list[dict[str, Any]]:
    """The last bag's elements: DaskRunnerResult's futures (one per computed bag) hold them."""
    found = []
    for bag in result.client.gather(result.futures):
        for item in bag:
            found.append(item.value if isinstance(item, WindowedValue) else item)
    return found


def _remove_old_outputs(spec: JobSpec) -> None:
    """A rerun (an adopted job) may split its input differently: no stale shard may remain."""
    if spec.layout == "vertex":
        patterns = [_join(spec.output_path, f"{prefix}_*{SUFFIX}")
                    for prefix in (PREDICTIONS, VERTEX_ERRORS)]
    else:
        patterns = [_join(spec.output_path, f"{RESULTS_BASENAME}-*-of-*")]
    old = [m.path for found in FileSystems.match(patterns) for m in found.metadata_list]
    if old:
        FileSystems.delete(old)


def _write(path: str, text: str) -> None:
    with FileSystems.create(path) as f:
        f.write(text.encode())


def run(spec: JobSpec) -> dict[str, int]:
    """Run the job on the DaskRunner to the end; the counts of predictions and errors."""
    if not any(o.startswith(("--dask_npartitions", "--dask_partition_size"))
               for o in spec.runner_options):
        # One range per dask partition (the runner's default packs 128 into one task).
        spec.runner_options = [*spec.runner_options, "--dask_partition_size=1"]
    opts = options(spec)
    ranges = sources.expand(list(spec.input_paths), spec.data_format, max(2, spec.workers),
                            spec.data_roots, spec.storage_answer_s)
    _remove_old_outputs(spec)
    # Beam knows the runner by its module path only (runners/runner.py's create_runner).
    from apache_beam.runners.dask.dask_runner import DaskRunner

    pipeline = beam.Pipeline(runner=DaskRunner(), options=opts)
    _ = (pipeline | "Input ranges" >> beam.Create(list(enumerate(ranges)))
         | "Predict and write" >> beam.ParDo(ShardDoFn(spec, len(ranges))))
    result = pipeline.run()
    result.wait_until_finish()
    summaries = _summaries(result)
    if spec.layout == "vertex":  # each task wrote its own errors shard
        return {"predictions": sum(s["predictions"] for s in summaries),
                "errors": sum(s["failed"] for s in summaries)}
    errors: collections.Counter[str] = collections.Counter()
    for summary in summaries:
        errors.update(summary["errors"])
    _write(_join(spec.output_path, f"{ERRORS_BASENAME}-00000-of-00001"),
           "".join(records.errors_line(m, c) + "\n" for m, c in errors.items()))
    keys = next((s["keys"] for s in summaries if s["keys"]), None)
    if spec.output_format == "CSV":
        _write(_join(spec.output_path, RESULTS_BASENAME + HEADER_SUFFIX),
               records.csv_row(keys or []))
    return {"predictions": sum(s["predictions"] for s in summaries),
            "errors": sum(errors.values())}
