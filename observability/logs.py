"""Log output: plain text, or Cloud Logging's structured JSON on stdout (MLEMU_LOG_FORMAT=json).

JSON lines follow Cloud Logging's special fields
(https://cloud.google.com/logging/docs/structured-logging#special-payload-fields): `severity`,
`message`, `time`, `logging.googleapis.com/trace` (projects/PROJECT/traces/TRACE_ID, the project
from settings) with `spanId` and `trace_sampled` from the request context, `httpRequest` for the
access log (http.py), and `logging.googleapis.com/labels` with the model, version and caller.
python-json-logger does the encoding. A predictor's own `print` (stdout and stderr) and
`logging` lines go the same way, attributed to its model and version; every process
(gunicorn's master and workers, the gRPC server) configures its logging here.

TensorFlow's C++ logging bypasses Python: `app.py serve` quiets it (emulator.QUIET_NATIVE_LOGS),
and `native_stderr` turns whatever its import still writes to stderr (absl's lines, printed
before absl reads any level) into log records at their own severity (absl INFO as debug), so
they follow the log level and format like every other line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from observability import context

TRACE = "logging.googleapis.com/trace"
SPAN = "logging.googleapis.com/spanId"
SAMPLED = "logging.googleapis.com/trace_sampled"
LABELS = "logging.googleapis.com/labels"
TEXT_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s%(attribution)s: %(message)s"

#: absl's C++ line prefix (severity letter, MMDD date) -> logging level. Its INFO lines at import
#: are banners (oneDNN, CPU instructions): shown at mlemu's debug level only.
_ABSL_LEVELS = {"I": logging.DEBUG, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}
_ABSL_LINE = re.compile(r"([IWEF])\d{4} ")
#: absl's own notice before its logging is initialised (TF_CPP_MIN_LOG_LEVEL does not reach it).
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called"
_CAPTURE = threading.Lock()


@contextlib.contextmanager
def native_stderr(logger_name: str) -> Iterator[None]:
    """Inside the block, what native code writes to file descriptor 2 (TensorFlow's import:
    absl lines that ignore TF_CPP_MIN_LOG_LEVEL) becomes log records at its own severity, so
    the log level and format apply to it. Other lines written meanwhile are logged as WARNING."""
    with _CAPTURE, tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            _relog(logging.getLogger(logger_name), captured.read().decode(errors="replace"))


def _relog(logger: logging.Logger, text: str) -> None:
    level = logging.WARNING
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _ABSL_LINE.match(line)
        if match:
            level = _ABSL_LEVELS[match.group(1)]
        elif line.startswith(_ABSL_NOTICE):
            level = logging.DEBUG
        logger.log(level, line)  # a line without a prefix continues the one before


class ContextFilter(logging.Filter):
    """Adds the request's trace and the model/version/caller labels to every record."""

    def __init__(self, project: str) -> None:
        super().__init__()
        self.project = project

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = context.current()
        labels: dict[str, str] = {}
        if ctx is not None:
            if ctx.trace_id:
                setattr(record, TRACE, f"projects/{self.project}/traces/{ctx.trace_id}")
                if ctx.span_id:
                    setattr(record, SPAN, ctx.span_id)
                setattr(record, SAMPLED, ctx.sampled)
            if ctx.model:
                labels.update(model=ctx.model, version=ctx.version)
            if ctx.caller:
                labels["caller"] = ctx.caller
        who = context.predictor()
        if who is not None:
            labels.update(model=who[0], version=who[1])
        if labels:
            setattr(record, LABELS, labels)
        record.attribution = f" [{labels['model']}/{labels['version']}]" if "model" in labels else ""
        return True


def cloud_logging_formatter() -> logging.Formatter:
    """One Cloud Logging entry per record (python-json-logger does the encoding). Imported here,
    when JSON logs are chosen: text logs (`make serve`) never pay for the library."""
    from pythonjsonlogger.core import RESERVED_ATTRS
    from pythonjsonlogger.json import JsonFormatter

    # `stack_trace` is one of the fields Error Reporting reads a traceback from.
    return JsonFormatter(["message", "levelname", "name"], timestamp="time",
                         rename_fields={"levelname": "severity", "name": "logger",
                                        "exc_info": "stack_trace"},
                         reserved_attrs=[*RESERVED_ATTRS, "attribution"])



class PredictorOutput(io.TextIOBase):
    """sys.stdout / sys.stderr: lines written while a predictor's code runs become log records
    attributed to it (`level`); everything else passes straight to the real stream."""

    def __init__(self, stream: TextIO, level: int) -> None:
        self.stream = stream
        self.level = level
        self.logger = logging.getLogger("mlemu.predictor")
        self._pending = threading.local()

    def write(self, text: str) -> int:
        if context.predictor() is None:
            return self.stream.write(text)
        pending = getattr(self._pending, "text", "") + text
        *lines, rest = pending.split("\n")
        self._pending.text = rest
        for line in lines:
            self.logger.log(self.level, line)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


_HANDLER = "mlemu"


def configure(level: str, log_format: str, project: str) -> None:
    """This process's logging: one handler on the root logger (gunicorn's loggers included)."""
    out, err = _real(sys.stdout), _real(sys.stderr)
    if log_format == "json":
        handler: logging.Handler = logging.StreamHandler(out)
        handler.setFormatter(cloud_logging_formatter())
    else:
        handler = logging.StreamHandler(_own_descriptor(err))
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(ContextFilter(project))
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in list(root.handlers):  # a handler an earlier configure installed (tests build many
        if old.get_name() == _HANDLER:  # apps in one process); other code's handlers stay
            root.removeHandler(old)
            if isinstance(old, logging.StreamHandler) and old.stream not in (out, err):
                old.stream.close()  # the descriptor _own_descriptor opened for it
    root.addHandler(handler)
    root.setLevel(level.upper())
    # TensorFlow's Python logger (deprecation notices for the TF1 loader, "Restoring parameters
    # from ...") talks about mlemu's own calls, not the user's model: errors only, but at debug.
    quiet = logging.DEBUG if level.lower() == "debug" else logging.ERROR
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(quiet)
    for name in ("gunicorn.error", "gunicorn.access"):
        gunicorn_log = logging.getLogger(name)
        for old in list(gunicorn_log.handlers):
            gunicorn_log.removeHandler(old)
        gunicorn_log.propagate = True
    sys.stdout = PredictorOutput(out, logging.INFO)
    sys.stderr = PredictorOutput(err, logging.ERROR)


def _own_descriptor(stream: TextIO) -> TextIO:
    """`stream` on a descriptor of its own, so native_stderr's capture of descriptor 2 never
    takes log records written meanwhile (falls back to `stream` when it has no descriptor)."""
    try:
        return os.fdopen(os.dup(stream.fileno()), "w", buffering=1, encoding="utf-8",
                         errors="backslashreplace")
    except (AttributeError, OSError, io.UnsupportedOperation):
        return stream


def _real(stream: TextIO) -> TextIO:
    return stream.stream if isinstance(stream, PredictorOutput) else stream
