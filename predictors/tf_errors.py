"""A TensorFlow runtime error as the words TF Serving and AI Platform report (no TensorFlow import)."""

from __future__ import annotations


def op_message(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        # The runtime's message quotes the input's bytes (ParseExample: "Could not parse example
        # input, value: '<serialized>'", tensorflow/core/util/example_proto_fast_parsing.cc), and
        # the Python binding fails to decode them as UTF-8: report TensorFlow's words, with the
        # bytes that are not UTF-8 escaped, rather than the codec's.
        return op_message(_Message(exc.object.decode("utf-8", "backslashreplace")))
    message = str(getattr(exc, "message", "") or exc)
    # Python's session wraps the runtime's message; TF Serving reports the runtime's own.
    message = message.removeprefix("Graph execution error:").strip()
    return message.split("\n\nOriginal stack trace", 1)[0].strip()


class _Message(Exception):
    """A runtime message recovered from the bytes Python could not decode."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
