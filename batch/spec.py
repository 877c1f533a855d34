"""JobSpec: one batch prediction run, as the launcher hands it to the pipeline's process.

Everything is plain JSON so the spec can cross into a child process (and, for remote runners,
into Beam's pipeline options). Paths are as the pipeline must open them: local paths, or gs://
URIs a remote worker resolves itself.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

RESULTS_BASENAME = "prediction.results"
ERRORS_BASENAME = "prediction.errors_stats"
#: outputDataFormat CSV: the rows' shards end with CSV_SUFFIX, their keys go to the one file
#: RESULTS_BASENAME + HEADER_SUFFIX (batch/records.py says whose layout this is).
CSV_SUFFIX = ".csv"
HEADER_SUFFIX = "_header.csv"
#: Vertex AI's csv and file-list inputs: the job's reader makes each record a JSON instance
#: (batch/vertex_inputs.py).
CSV_INPUT = "CSV"
FILE_LIST_INPUT = "FILE_LIST"
BUILT_FORMATS = (CSV_INPUT, FILE_LIST_INPUT)
TFRECORD_FORMATS = ("TF_RECORD", "TF_RECORD_GZIP")
#: The runners a job's process runs itself (its workers are local), and the one that gets the
#: graph of batch/distributed.py instead of batch/pipeline.py's (that module says why).
LOCAL_RUNNER = "DirectRunner"
DASK_RUNNER = "DaskRunner"


@dataclasses.dataclass
class JobSpec:
    input_paths: list[str]
    data_format: str  # JSON, TEXT, TF_RECORD, TF_RECORD_GZIP; CSV or FILE_LIST (Vertex AI)
    output_path: str
    model_dir: str  # a local directory, or a gs:// URI the worker downloads in setup
    framework: str = ""  # "" for a custom prediction routine
    prediction_class: str = ""
    package_uris: list[str] = dataclasses.field(default_factory=list)
    signature_name: str = ""
    output_format: str = "JSON"  # JSON, or CSV (rows in shards, keys in a header file)
    batch_size: int = 64
    workers: int = 1
    #: Beam runner name (DirectRunner, DataflowRunner, FlinkRunner, ...) and extra options.
    runner: str = "DirectRunner"
    runner_options: list[str] = dataclasses.field(default_factory=list)
    #: A file the workers append one line per predicted batch to (LOCAL_RUNNER only: remote
    #: workers see no disk of the server's).
    progress_path: str = ""
    storage_emulator_host: str = ""
    #: Seconds Cloud Storage has to list a remote input pattern (batch/sources.py, expand).
    storage_answer_s: float = 30.0
    #: Whose files: "ml" (AI Platform's prediction.results-*, errors_stats) or "vertex"
    #: (Vertex AI's predictions_NNNNN.jsonl and errors_NNNNN.jsonl, batch/records.py).
    layout: str = "ml"
    #: The only directories a local input file may resolve into (MLEMU_DATA_ROOTS, resolved);
    #: None: any. Checked again after the patterns are expanded (batch/sources.py).
    data_roots: list[str] | None = None
    #: Vertex AI's instanceConfig as the request gave it (batch/vertex_instances.py), or None.
    instance_config: dict[str, Any] | None = None

    @property
    def built_records(self) -> bool:
        """Whether the job's reader makes each record a JSON instance (batch/vertex_inputs.py):
        Vertex AI's csv and file-list inputs, and its TFRecords (each `{"b64": ...}`, where ml
        v1 reads a record as a JSON instance or feeds it to a string input as it is)."""
        return self.data_format in BUILT_FORMATS or (
            self.layout == "vertex" and self.data_format in TFRECORD_FORMATS)

    @property
    def forked_workers(self) -> bool:
        """Whether the job's workers are forked by its fork server (batch/forkserver.py): the
        local DirectRunner with more than one worker, on Linux (elsewhere Beam's own
        multi-processing mode starts them). One worker runs in the pipeline's own process;
        other runners start their workers themselves."""
        return self.runner == "DirectRunner" and self.workers > 1 and \
            sys.platform.startswith("linux")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        data: dict[str, Any] = json.loads(text)
        return cls(**data)

    def write(self, path: Path) -> None:
        path.write_text(self.to_json())

    @classmethod
    def read(cls, path: Path) -> JobSpec:
        return cls.from_json(path.read_text())
