"""Which engine runs a job's pipeline, with which options: the DirectRunner's own batch engine
(the FnApiRunner, with mlemu's forked worker pool for several workers), or the runner
MLEMU_BEAM_RUNNER names with MLEMU_BEAM_OPTIONS (imported only in the pipeline's process)."""

from __future__ import annotations

import logging
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from batch.forkserver import ForkServer
from batch.spec import JobSpec


def anonymous_gcs() -> None:
    """Talk to a Cloud Storage emulator anonymously, as registry/gcs.py does. Beam's GCS client
    asks for Application Default Credentials whatever --no_auth says, retrying for about half a
    minute before it falls back to anonymous access; settle that answer up front (Beam caches it
    per process in auth._Credentials)."""
    from apache_beam.internal.gcp import auth

    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials, auth._Credentials._credentials_init = None, True


def options(spec: JobSpec) -> PipelineOptions:
    """The runner's options: DirectRunner in multi-processing mode for several workers
    (in-memory for one), or MLEMU_BEAM_RUNNER with MLEMU_BEAM_OPTIONS."""
    args = [f"--runner={spec.runner}"]
    if spec.runner == "DirectRunner":
        # With forked workers the runner's environment is mlemu's worker pool (runner() below);
        # the running mode must then stay in_memory, which FnApiRunner.run_pipeline reads only
        # to replace that environment (multi_processing: SubprocessSDKEnvironment, Beam's own
        # workers, where mlemu does not fork them).
        mode = "multi_processing" if spec.workers > 1 and not spec.forked_workers else "in_memory"
        args += [f"--direct_running_mode={mode}", f"--direct_num_workers={spec.workers}"]
    if spec.storage_emulator_host:
        args.append("--no_auth")
        anonymous_gcs()
    args += list(spec.runner_options)
    return PipelineOptions(args)


def runner(spec: JobSpec, opts: PipelineOptions, forks: ForkServer | None) -> Any:
    """The runner to use; and for DirectRunner the worker pool's gRPC server, if any.

    DirectRunner means the engine the DirectRunner itself runs a batch pipeline on, the
    FnApiRunner. Beam 2.77's DirectRunner (SwitchingDirectRunner in apache_beam/runners/direct/
    direct_runner.py) first tries the PrismRunner: it downloads the Prism binary from GitHub and
    runs the Python code in the pipeline's own process (a LOOPBACK environment, worker threads),
    ignoring the worker count; without network it falls back to the FnApiRunner after the
    failed download. The options the workers receive are the DirectRunner's (the same
    ExtendedProvisionInfo it builds). With forked workers the FnApiRunner's environment is
    EXTERNAL, served by mlemu's pool (batch/workerpool.py), whose workers the job's fork server
    forks; the FnApiRunner starts `direct_num_workers` of them (WorkerHandlerManager.
    get_worker_handlers in fn_api_runner/worker_handlers.py) and deals each stage's input out
    among them as in multi-processing mode."""
    if spec.runner != "DirectRunner":
        return spec.runner, None
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(opts.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    if forks is None:
        return fn_runner.FnApiRunner(provision_info=provision), None
    from apache_beam.transforms import environments
    from google.protobuf import json_format

    from batch import workerpool

    logging.getLogger(fn_runner.__name__).addFilter(_InMemoryWarning())
    address, server = workerpool.serve(workerpool.WorkerPool(
        forks, json_format.MessageToJson(encoded)))  # the JSON SubprocessSdkWorker passes
    environment = environments.ExternalEnvironment(
        address, capabilities=environments.python_sdk_capabilities())
    return fn_runner.FnApiRunner(default_environment=environment,
                                 provision_info=provision), server


class _InMemoryWarning(logging.Filter):
    """Drops the FnApiRunner's warning that in_memory mode ignores direct_num_workers: true of
    its own environments, not of the EXTERNAL one it is given here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("If direct_num_workers is not equal to 1")


