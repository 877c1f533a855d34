"""Batch prediction (ml v1 `projects.jobs` with a `predictionInput`) as an Apache Beam pipeline.

The real service ran batch prediction as a Dataflow (Beam) pipeline; its code was published as
Google's Cloud ML SDK and lives on in kubeflow/batch-predict
(kubeflow_batch_predict/dataflow/batch_prediction_pipeline.py, batch_prediction.py). mlemu builds
the same pipeline over its own predictors:

  spec.py      JobSpec: everything a pipeline run needs, as JSON (it crosses a process boundary)
  records.py   decoding one input record into an instance, encoding one result line (no Beam)
  sources.py   the inputs through Beam's FileSystems: patterns to byte ranges, ranges to records
  pipeline.py  the Beam graph: ranges -> batches of records -> PredictDoFn -> WriteToText shards
  launcher.py  the server side: run the pipeline in a child process, watch it, cancel it
  __main__.py  the child process: `python -m batch SPEC_FILE`
  forkserver.py  a local job's fork server: imports Beam and the framework once, forks workers
  workerpool.py  Beam's BeamFnExternalWorkerPool service over that fork server (EXTERNAL env.)

`apache_beam` is imported only by pipeline.py, sources.py and workerpool.py, and only in the
child process, its fork server (or a remote worker): the server and the serving path never
import it. `import batch` imports
nothing heavy.
"""
