"""Batch prediction (ml v1 `projects.jobs` with a `predictionInput`) as an Apache Beam pipeline.

The real service ran batch prediction as a Dataflow (Beam) pipeline; its code was published as
Google's Cloud ML SDK and lives on in kubeflow/batch-predict
(kubeflow_batch_predict/dataflow/batch_prediction_pipeline.py, batch_prediction.py). mlemu builds
the same pipeline over its own predictors:

  spec.py      JobSpec: everything a pipeline run needs, as JSON (it crosses a process boundary)
  records.py   decoding one input record into an instance, encoding one result line (no Beam)
  sources.py   the inputs through Beam's FileSystems: patterns to byte ranges, ranges to records
  vertex_csv.py  Vertex AI's csv input: a row to an instance (no Beam)
  vertex_inputs.py  Vertex AI's csv, file-list and tf-record inputs read as JSON instances
               (other formats: sources.py)
  vertex_instances.py  Vertex AI's instanceConfig: the instance sent, what the line shows (no Beam)
  vertex_records.py  Vertex AI's output lines and file names: instance (or key) beside
               prediction or error (no Beam)
  pipeline.py  the Beam graph: ranges -> batches of records -> PredictDoFn -> WriteToText shards
  distributed.py  the graph Beam's DaskRunner gets instead: one shard-writing task per range
  launcher.py  the server side: hand a job to a warm runner, watch it, cancel it
  runners.py   the server's warm runners, one per framework, reaped when idle (no Beam)
  runner.py    a runner: `python -m batch.runner`, Beam and a framework imported, forks jobs
  model_modules.py  the framework modules a pickled model names, for the runner to import
               before it forks the model's job (no Beam)
  job.py       a job's process (a fork of its runner): runs the pipeline, writes the result
  forkserver.py  a local job's fork server: a fork of the job's process, forks its workers
  workerpool.py  Beam's BeamFnExternalWorkerPool service over that fork server (EXTERNAL env.)

`apache_beam` is imported only by pipeline.py, distributed.py, sources.py, vertex_inputs.py and
workerpool.py (and by the runner's imports), and only in a runner and the processes it forks (or
a remote worker): the server and the serving path never import it. `import batch` imports nothing heavy.
"""
