"""`python app.py jobs ...`: batch prediction jobs on a running mlemu, in gcloud's words:

  python app.py jobs submit prediction JOB --model M [--version V] | --model-dir DIR
      --data-format JSON|TEXT|TF_RECORD|TF_RECORD_GZIP --input-paths P[,P] --output-path O
      [--region R] [--batch-size N] [--max-worker-count N] [--signature-name S]
      [--labels k=v,..] [--wait]
  python app.py jobs describe JOB
  python app.py jobs list [--filter F]
  python app.py jobs cancel JOB

(gcloud ai-platform jobs submit prediction takes the same flags, with --data-format in lower case
too: text, tf-record, tf-record-gzip.) --wait follows the job until it ends with a progress bar
(instances predicted of the total, when the inputs are local text files this command can count;
otherwise the count so far) and exits non-zero unless it SUCCEEDED.
"""

from __future__ import annotations

import glob
import os
import sys
import time
from typing import Any

import click
import yaml

from cli.client import Api, local_uri, table, with_api

FORMATS = {"json": "JSON", "text": "TEXT", "tf-record": "TF_RECORD", "tf_record": "TF_RECORD",
           "tf-record-gzip": "TF_RECORD_GZIP", "tf_record_gzip": "TF_RECORD_GZIP"}
POLL_S = 0.5
BAR_WIDTH = 30


@click.group("jobs")
def jobs() -> None:
    """Submit, describe, list and cancel batch prediction jobs on a running mlemu."""


@jobs.group("submit")
def submit() -> None:
    """Submit a job."""


def _format(value: str) -> str:
    fmt = FORMATS.get(value.lower())
    if fmt is None:
        raise click.BadParameter(f"must be one of {', '.join(sorted(set(FORMATS.values())))}.")
    return fmt


@submit.command("prediction")
@click.argument("job")
@click.option("--model", default=None, help="Model name (its default version runs).")
@click.option("--version", default=None, help="A version of --model.")
@click.option("--model-dir", default=None, help="A SavedModel directory (path or gs:// URI).")
@click.option("--data-format", required=True, help="JSON, TEXT, TF_RECORD or TF_RECORD_GZIP.")
@click.option("--input-paths", required=True, help="Comma-separated paths; * wildcards allowed.")
@click.option("--output-path", required=True)
@click.option("--region", default="us-central1", show_default=True)
@click.option("--batch-size", type=int, default=None)
@click.option("--max-worker-count", type=int, default=None)
@click.option("--signature-name", default=None)
@click.option("--labels", default=None, help="Comma-separated key=value pairs.")
@click.option("--wait", is_flag=True, help="Follow the job until it ends.")
@with_api
def submit_prediction(api: Api, job: str, model: str | None, version: str | None,
                      model_dir: str | None, data_format: str, input_paths: str,
                      output_path: str, region: str, batch_size: int | None,
                      max_worker_count: int | None, signature_name: str | None,
                      labels: str | None, wait: bool) -> None:
    if (model is None) == (model_dir is None):
        raise click.UsageError("Give exactly one of --model or --model-dir.")
    if version and not model:
        raise click.UsageError("--version may only be given with --model.")
    paths = [local_uri(p) for p in input_paths.split(",") if p]
    spec: dict[str, Any] = {"dataFormat": _format(data_format), "inputPaths": paths,
                            "outputPath": local_uri(output_path), "region": region}
    if model_dir:
        spec["uri"] = local_uri(model_dir)
    elif version:
        spec["versionName"] = f"{api.model(str(model))}/versions/{version}"
    else:
        spec["modelName"] = api.model(str(model))
    for key, value in (("batchSize", batch_size), ("maxWorkerCount", max_worker_count),
                       ("signatureName", signature_name)):
        if value is not None:
            spec[key] = value
    body: dict[str, Any] = {"jobId": job, "predictionInput": spec}
    if labels:
        body["labels"] = dict(pair.split("=", 1) for pair in labels.split(",") if "=" in pair)
    created = api.call("POST", f"projects/{api.project}/jobs", body)
    click.echo(f"Job [{job}] submitted successfully.")
    if not wait:
        click.echo(yaml.safe_dump({"jobId": created["jobId"], "state": created["state"]},
                                  sort_keys=False).rstrip())
        return
    final = _follow(api, job, _count_instances(spec))
    click.echo(yaml.safe_dump(final, sort_keys=False).rstrip())
    if final["state"] != "SUCCEEDED":
        raise SystemExit(1)


def _count_instances(spec: dict[str, Any]) -> int | None:
    """Lines in the job's local text inputs (None when they are elsewhere or binary)."""
    if spec["dataFormat"] not in ("JSON", "TEXT"):
        return None
    total = 0
    for pattern in spec["inputPaths"]:
        if "://" in pattern and not pattern.startswith("file://"):
            return None
        for path in glob.glob(pattern.removeprefix("file://")):
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return total


def _bar(done: int, total: int | None, state: str) -> str:
    if total:
        filled = min(BAR_WIDTH, BAR_WIDTH * done // total)
        return (f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total} instances "
                f"({100 * done // total}%) {state}")
    return f"{done} instances {state}"


def _follow(api: Api, job: str, total: int | None) -> dict[str, Any]:
    """Poll the job until it ends, drawing its progress: one line redrawn on a terminal, a new
    line per change otherwise (logs)."""
    name = f"projects/{api.project}/jobs/{job}"
    tty = sys.stdout.isatty()
    shown = ""
    while True:
        current = api.call("GET", name)
        output = current.get("predictionOutput", {})
        done = int(output.get("predictionCount", 0)) + int(output.get("errorCount", 0))
        line = _bar(done, total, current["state"])
        if line != shown:
            click.echo(("\r" + line) if tty else line, nl=not tty)
            shown = line
        if current["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            if tty:
                click.echo()
            return current
        time.sleep(POLL_S)


@jobs.command("describe")
@click.argument("job")
@with_api
def describe(api: Api, job: str) -> None:
    click.echo(yaml.safe_dump(api.call("GET", f"projects/{api.project}/jobs/{job}"),
                              sort_keys=False).rstrip())


@jobs.command("list")
@click.option("--filter", "filter_", default=None, help="A list filter, e.g. state=RUNNING.")
@with_api
def list_jobs(api: Api, filter_: str | None) -> None:
    items = api.list_all(f"projects/{api.project}/jobs", "jobs", filter=filter_)
    table([[j["jobId"], j["state"], j.get("createTime", "")] for j in items],
          ["JOB_ID", "STATUS", "CREATED"])


@jobs.command("cancel")
@click.argument("job")
@with_api
def cancel(api: Api, job: str) -> None:
    api.call("POST", f"projects/{api.project}/jobs/{job}:cancel", {})
    click.echo(f"Cancelled job [{job}].")
