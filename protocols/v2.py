"""Open Inference Protocol V2 over REST (KServe "V2 inference protocol", Triton/MLServer clients).

Spec: KServe docs/predict-api/v2/required_api.md, with the binary tensor data extension
(Triton docs/protocol/extension_binary_data.md) that tritonclient uses by default.

Routes:
  GET  /v2                                       server metadata {name, version, extensions}
  GET  /v2/health/live                           {"live": true}
  GET  /v2/health/ready                          {"ready": bool}; 503 until every model is loaded
  GET  /v2/models/{m}[/versions/{v}]             model metadata {name, versions, platform, ...}
  GET  /v2/models/{m}[/versions/{v}]/ready       {"name", "ready"}; 503 when not ready
  POST /v2/models/{m}[/versions/{v}]/infer       inference

Models come from the default project (MLEMU_PROJECT); {v} is the ml v1 version id, and without
one the model's default version serves. Errors are `{"error": "..."}` with a JSON content type:
unknown model 404, bad input 400. The request body is read whatever its Content-Type (tritonclient
sends none); gzip/deflate request bodies are accepted, and responses are compressed when the
client's Accept-Encoding asks for gzip or deflate.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from typing import TYPE_CHECKING

from flask import Blueprint, Response, current_app, request

import auth
import dataplane
from core.errors import ApiError, InvalidArgument
from core.payloads import Caller
from protocols import inference
from protocols.v2_codec import decode_rest_infer, encode_response, split_body
from web.handlers import register_error_renderer
from web.http import error_json, json_response, payload_too_large, read_body, request_caller

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu.v2")
bp = Blueprint("v2", __name__)
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _context() -> tuple[Emulator, Caller]:
    return current_app.extensions["mlemu"], request_caller()


#: A compressed body inflates to at most this many times its size (past a 1 MiB floor), as well
#: as to the message limit: 61 KB of gzip made 60 MiB of JSON, whose decoding into
#: Python objects took seconds of CPU and hundreds of MB. Real request bodies compress 3-20x.
MAX_INFLATION = 100
_INFLATION_FLOOR = 1 << 20


def decompress(data: bytes, encoding: str, limit: int) -> bytes:
    """A gzip/deflate body, inflated to at most `limit` bytes and MAX_INFLATION times its own
    size (a small bomb stays small)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return data
    ratio_limit = max(_INFLATION_FLOOR, len(data) * MAX_INFLATION)
    if ratio_limit < limit:
        limit = ratio_limit
        too_large: Exception = InvalidArgument(
            f"Request payload size exceeds the limit: the {encoding} body inflates past "
            f"{MAX_INFLATION} times its size ({limit} bytes).")
    else:
        too_large = payload_too_large(limit)
    if encoding not in _WBITS:
        raise InvalidArgument(f"Unsupported Content-Encoding {encoding!r}; use gzip or deflate.",
                              http_status=415)
    error: Exception | None = None
    attempts = [_WBITS[encoding]] + ([-zlib.MAX_WBITS] if encoding == "deflate" else [])
    for wbits in attempts:  # "deflate" is zlib-wrapped by the RFC; some clients send it raw
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error as exc:
            error = exc
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise too_large
        return out
    raise InvalidArgument(f"The request body is not valid {encoding} data: {error}.")


def _compressed(response: Response) -> Response:
    """The response in the coding the client's Accept-Encoding prefers (RFC 9110 12.5.3, as
    werkzeug parses it: `q=0` refuses a coding, identity wins when it is preferred)."""
    response.vary.add("Accept-Encoding")
    coding = request.accept_encodings.best_match(["gzip", "deflate", "identity"])
    if coding in ("gzip", "deflate"):
        data = response.get_data()
        response.set_data(gzip.compress(data) if coding == "gzip" else zlib.compress(data))
        response.headers["Content-Encoding"] = coding
    return response


@bp.get("/v2")
def server_metadata() -> Response:
    emu, caller = _context()
    auth.require_authenticated(emu, caller)  # names no model: any verified caller may read it
    return json_response({"name": inference.SERVER_NAME, "version": inference.SERVER_VERSION,
                          "extensions": inference.EXTENSIONS})


@bp.get("/v2/health/live")
def server_live() -> Response:
    return json_response({"live": True})


@bp.get("/v2/health/ready")
def server_ready() -> Response:
    ready = inference.server_ready(current_app.extensions["mlemu"])
    return json_response({"ready": ready}, 200 if ready else 503)


@bp.get("/v2/models/<model>")
@bp.get("/v2/models/<model>/versions/<version>")
def model_metadata(model: str, version: str | None = None) -> Response:
    emu, caller = _context()
    return json_response(inference.metadata(emu, caller, model, version))


@bp.get("/v2/models/<model>/ready")
@bp.get("/v2/models/<model>/versions/<version>/ready")
def model_ready(model: str, version: str | None = None) -> Response:
    emu, caller = _context()
    ready = inference.model_ready(emu, caller, model, version)
    return json_response({"name": model, "ready": ready}, 200 if ready else 503)


@bp.post("/v2/models/<model>/infer")
@bp.post("/v2/models/<model>/versions/<version>/infer")
def infer(model: str, version: str | None = None) -> Response:
    emu, caller = _context()
    dataplane.admit(emu, caller, inference.model_ref(emu, model, version))
    limit = emu.settings.max_message_bytes
    body = decompress(read_body(limit), request.headers.get("Content-Encoding", ""), limit)
    header, binary = split_body(body, request.headers.get("Inference-Header-Content-Length"))
    req = decode_rest_infer(header, binary)
    served = inference.serve(emu, caller, model, version)
    outputs = inference.run_tensors(served, req.inputs, req.parameters, req.output_names)
    outputs = inference.select_outputs(outputs, req.output_names)
    data, header_length = encode_response(model, served.version_id, req, outputs)
    if header_length is None:
        return _compressed(Response(data, mimetype="application/json"))
    response = Response(data, mimetype="application/octet-stream")
    response.headers["Inference-Header-Content-Length"] = str(header_length)
    return _compressed(response)


def render_v2_error(exc: ApiError) -> Response:
    """`{"error": "..."}` in V2's words (a missing model as KServe/Triton say it)."""
    return error_json(inference.v2_error(exc))


register_error_renderer(bp, render_v2_error, log)
