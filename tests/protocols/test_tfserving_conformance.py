"""TF Serving REST conformance, byte for byte, on TF1-era SavedModels declared like TF Serving's
testdata (half_plus_two with x: [?, 1] parsed from tf.Example, a two-version model, one signature
per tensor dtype, several named string/int/float inputs and outputs).

Expected bodies are what the current TensorFlow Serving source writes (tensorflow/serving:
tensorflow_serving/util/json_tensor.cc, model_servers/http_rest_api_handler.cc,
http_rest_api_util.cc, servables/tensorflow/{predict_util,classifier,regressor}.cc), one table per
area of issue 15: feeding, number conversions, parsing, checks and their order, bytes, paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from tests.kit import modelkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tf1_testdata(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The TF1 builder exports, made once per test session."""
    from tests.kit import tfmodels

    base = tmp_path_factory.mktemp("tf1-testdata")
    return {"hpt": tfmodels.half_plus_two(base / "hpt"),
            "hp3": tfmodels.half_plus_two(base / "hp3", b=3.0),
            "types": tfmodels.types_model(base / "types")}


@pytest.fixture(scope="module")
def client(tf1_testdata: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    from app import create_app

    base = tmp_path_factory.mktemp("conformance")
    config = modelkit.bootstrap_file(base / "bootstrap.yaml", {
        "hpt": {"versions": {"v1": {"deploymentUri": str(tf1_testdata["hpt"]),
                                    "serving": {"tfServingVersion": 123}}}},
        "two": {"defaultVersion": "v2", "versions": {"v1": {"deploymentUri": str(tf1_testdata["hpt"])},
                                                     "v2": {"deploymentUri": str(tf1_testdata["hp3"])}}},
        "types": {"versions": {"v1": {"deploymentUri": str(tf1_testdata["types"])}}},
    })
    settings = Settings(state_dir=base / "state", config_file=config, default_project="p")
    return create_app(settings, warm=False).test_client()


def raw(client: Any, path: str, body: bytes | str | None = None) -> tuple[int, bytes]:
    response = client.get(path) if body is None else client.post(path, data=body)
    assert response.headers["Content-Type"] == "application/json"
    return response.status_code, response.data


def pretty_error(message: str) -> bytes:
    """MakeJsonFromStatus' bytes (rapidjson PrettyWriter)."""
    return ('{\n    "error": ' + json.dumps(message, ensure_ascii=False) + "\n}").encode()


def outputs(*values: str) -> bytes:
    """A columnar answer of one output: every value on its own line (PrettyWriter, no single-line)."""
    return ('{\n    "outputs": [\n' + ",\n".join("        " + v for v in values) + "\n    ]\n}").encode()


# -- 1. feeding does not check static shapes -----------------------------------------------------

@pytest.mark.parametrize(("path", "body", "expected"), [
    ("/v1/models/hpt:predict", '{"instances": [1.0, 2.0, 5.0]}',
     b'{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'),
    ("/v1/models/hpt:predict", '{"instances": [[1.0], [2.0]]}',
     b'{\n    "predictions": [[2.5], [3.0]\n    ]\n}'),
    ("/v1/models/hpt:predict", '{"inputs": [1.0, 2.0]}', outputs("2.5", "3.0")),
    ("/v1/models/hpt:predict", '{"inputs": {"x": [[1.0]]}}',
     b'{\n    "outputs": [\n        [\n            2.5\n        ]\n    ]\n}'),
    ("/v1/models/hpt:regress", '{"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]}',
     b'{\n    "results": [2.5, 3.0]\n}'),
    ("/v1/models/hpt:classify", '{"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 3.0}]}',
     b'{\n    "results": [[["", 2.5]], [["", 3.5]]\n    ]\n}'),
    ("/v1/models/two:predict", '{"instances": [1.0]}', b'{\n    "predictions": [3.5\n    ]\n}'),
    ("/v1/models/two/versions/1:predict", '{"instances": [1.0]}', b'{\n    "predictions": [2.5\n    ]\n}'),
])
def test_feeding_ignores_static_shapes(client: Any, path: str, body: str, expected: bytes) -> None:
    assert raw(client, path, body) == (200, expected)


def test_ai_platform_predict_on_tensorflow_feeds_the_same_way(client: Any) -> None:
    response = client.post("/v1/projects/p/models/hpt:predict", json={"instances": [1.0, 2.0, 5.0]})
    assert (response.status_code, response.get_json()) == (200, {"predictions": [2.5, 3.0, 4.5]})


# -- 2. numbers and every dtype, as AddValueToTensor / AddSingleValueAndAdvance convert them ----

@pytest.mark.parametrize(("dtype", "value", "status", "expected"), [
    ("float", "1435774380", 200, "1.43577434e+09"),  # api_rest.md's example: 1435774336 in float32
    ("float", "1e39", 200, "Infinity"),  # static_cast<float> of a double beyond float range
    ("float", "9000000", 200, "9e+06"),
    ("float", "0.00003", 200, "3e-05"),
    ("float", "0.1", 200, "0.1"),
    ("float", "3", 200, "3.0"),
    ("float", "-Infinity", 200, "-Infinity"),
    ("float", "true", 400, "JSON Value: true Type: True is not of expected type: float"),
    ("float", '"1"', 400, 'JSON Value: "1" Type: String is not of expected type: float'),
    ("float", "null", 400, "JSON Value: null Type: Null is not of expected type: float"),
    ("float", '{"a": [1, 2]}', 400,
     'JSON Value: {\n    "a": [1, 2]\n} Type: Object is not of expected type: float'),
    ("double", "0.3333333333333333", 200, "0.33333333333333331"),
    ("double", "1e300", 200, "1e+300"),
    ("int8", "300", 200, "44"),  # int_val holds an int32; the cast to int8 wraps
    ("int8", "-129", 200, "127"),
    ("uint8", "-1", 200, "255"),
    ("int16", "70000", 200, "4464"),
    ("int32", "2147483648", 400, "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
    ("int32", "1.0", 400, "JSON Value: 1.0 Type: Number is not of expected type: int32"),
    ("int64", "-9223372036854775808", 200, "-9223372036854775808"),
    ("int64", "9223372036854775808", 400,
     "JSON Value: 9223372036854775808 Type: Number is not of expected type: int64"),
    ("uint32", "-1", 400, "JSON Value: -1 Type: Number is not of expected type: uint32"),
    ("uint64", "18446744073709551615", 200, "18446744073709551615"),
    ("uint64", "18446744073709551616", 400,  # beyond 64 bits rapidjson holds a double
     "JSON Value: 18446744073709552000.0 Type: Number is not of expected type: uint64"),
    ("bool", "true", 200, "true"),
    ("bool", "1", 400, "JSON Value: 1 Type: Number is not of expected type: bool"),
    ("string", '"caf\u00e9"', 200, '"caf\u00e9"'),
    ("string", '{"b64": "aGk="}', 200, '"hi"'),
    ("string", '{"b64": 1}', 400, 'JSON Value: {\n    "b64": 1\n} not formatted correctly for base64 data'),
    ("string", '{"b64": "!!"}', 400, "Unable to base64 decode"),
    ("string", "1", 400, "JSON Value: 1 Type: Number is not of expected type: string"),
    ("half", "1.0", 501, "Conversion of JSON Value: 1.0 to type: half"),
    ("uint16", "1", 501, "Conversion of JSON Value: 1 to type: uint16"),
])
def test_values_convert_as_tf_serving_converts_them(client: Any, dtype: str, value: str, status: int,
                                                    expected: str) -> None:
    body = f'{{"signature_name": "echo_{dtype}", "inputs": [{value}]}}'
    want = outputs(expected) if status == 200 else pretty_error(expected)
    assert raw(client, "/v1/models/types:predict", body) == (status, want)


def test_booleans_among_numbers_are_refused(client: Any) -> None:
    body = '{"signature_name": "echo_float", "inputs": [1.0, true]}'
    assert raw(client, "/v1/models/types:predict", body) == (
        400, pretty_error("JSON Value: true Type: True is not of expected type: float"))


@pytest.mark.parametrize(("dtype", "value", "expected"), [
    ("float", '"a"', 'INVALID_ARGUMENT: JSON Value: "a" Type: String is not of expected type: float'),
    ("half", "1.0", "UNIMPLEMENTED: Conversion of JSON Value: 1.0 to type: half"),  # wrapped: a 400
])
def test_row_errors_nest_the_value_error(client: Any, dtype: str, value: str, expected: str) -> None:
    body = f'{{"signature_name": "echo_{dtype}", "instances": [{value}]}}'
    assert raw(client, "/v1/models/types:predict", body) == (400, pretty_error(
        f"Failed to process element: 0 of 'instances' list. Error: {expected}"))


def test_named_outputs_of_several_types(client: Any) -> None:
    rows = {"signature_name": "mixed", "instances": [{"a": [1.0, 2.5], "n": 3, "s": "\u00e9t\u00e9"},
                                                     {"a": [0.5, 0.25], "n": -1, "s": ""}]}
    assert raw(client, "/v1/models/types:predict", json.dumps(rows)) == (200, (
        b'{\n    "predictions": [\n        {\n            "n2": 6,\n            "s_bytes": {\n'
        b'                "b64": "w6l0w6k="\n            },\n            "size": 5,\n'
        b'            "total": 6.5\n        },\n        {\n            "n2": -2,\n'
        b'            "s_bytes": {\n                "b64": ""\n            },\n            "size": 0,\n'
        b'            "total": -0.25\n        }\n    ]\n}'))


# -- 3. parsing as rapidjson parses (iterative, NaN/Infinity, stop when done) -------------------

DEEP = b"[" * 500_000 + b"]" * 500_000


@pytest.mark.parametrize(("body", "status", "expected"), [
    (b'{"instances": [1.0, 2.0]} and then anything', 200, b'{\n    "predictions": [2.5, 3.0\n    ]\n}'),
    (b'{"unread": ' + DEEP + b', "instances": [1.0]}', 200, b'{\n    "predictions": [2.5\n    ]\n}'),
    (b'{"instances": [NaN, Infinity, -Infinity]}', 200,
     b'{\n    "predictions": [NaN, Infinity, -Infinity\n    ]\n}'),
    (b'{"signature_name": "serving_default", "instances": [1.0], "note": "caf\xe9"}', 200,
     b'{\n    "predictions": [2.5\n    ]\n}'),  # rapidjson does not check UTF-8
    (b"", 400, pretty_error("JSON Parse error: The document is empty")),
    (b"   ", 400, pretty_error("JSON Parse error: The document is empty. at offset: 3")),
    (b'{"instances": [1.0,]}', 400, pretty_error("JSON Parse error: Invalid value. at offset: 19")),
    (b'{"instances": [1.0 2.0]}', 400,
     pretty_error("JSON Parse error: Missing a comma or ']' after an array element. at offset: 19")),
    (b'{"instances" [1.0]}', 400,
     pretty_error("JSON Parse error: Missing a colon after a name of object member. at offset: 13")),
    (b'{"instances": [1e400]}', 400,
     pretty_error("JSON Parse error: Number too big to be stored in double. at offset: 15")),
    (b"[1, 2]", 400, pretty_error("JSON Value: [1, 2] Is not object")),
    (b'"x"', 400, pretty_error('JSON Value: "x" Is not object')),
    (b'{"instances": [' + b"[" * 100_000 + b"1.0" + b"]" * 100_000 + b"]}", 400, pretty_error(
        "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value is a list "
        "nested 100000 deep; a tensor has at most 63 dimensions here")),
])
def test_bodies_parse_as_rapidjson_parses_them(client: Any, body: bytes, status: int,
                                               expected: bytes) -> None:
    assert raw(client, "/v1/models/hpt:predict", body) == (status, expected)


# -- 4. the same checks in the same order, in TF Serving's words ---------------------------------

A, N, S = "[1.0, 2.0]", "1", '"x"'


@pytest.mark.parametrize(("path", "body", "status", "error"), [
    ("types:predict", f'{{"signature_name": "mixed", "instances": [{{"a": {A}, "n": {N}, "s": {S}}}, '
                      f'{{"a": [1.0, 2.0, 3.0], "n": 2, "s": "y"}}]}}', 400,
     "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor "
     "size: 2 but got: 3"),
    ("types:predict", '{"signature_name": "mixed", "instances": [{"a": [[1.0, 2.0]], "n": 1, "s": "x"}, '
                      '{"a": [[1.0], [2.0]], "n": 2, "s": "y"}]}', 400,
     "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: Expecting shape "
     "[1,2] but got: [2,1]"),
    ("types:predict", f'{{"signature_name": "mixed", "instances": [{{"a": {A}, "n": {N}}}]}}', 400,
     "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": [1.0, 2.0],\n"
     "    \"n\": 1\n} keys must be equal to: a,n,s"),
    ("types:predict", f'{{"signature_name": "mixed", "instances": [{{"z": 1, "a": {A}, "n": {N}}}]}}', 400,
     "Failed to process element: 0 key: z of 'instances' list. Error: INVALID_ARGUMENT: JSON object: "
     "does not have named input: z"),
    ("types:predict", '{"signature_name": "mixed", "instances": ["x"]}', 400,
     "instances is a plain list, but expecting list of objects as multiple input tensors required as per "
     "tensorinfo_map"),
    ("types:predict", f'{{"signature_name": "mixed", "instances": [{{"a": {A}, "n": {N}, "s": {S}}}, [1]]}}',
     400, "Expecting object but got list at item 1 of input list"),
    ("hpt:predict", '{"instances": [1.0, {"x": 1.0}]}', 400,
     "Expecting value/list but got object at item 1 of input list"),
    ("types:predict", f'{{"signature_name": "mixed", "inputs": {{"a": [{A}], "n": [1]}}}}', 400,
     "Missing named input: s in 'inputs' object."),
    ("types:predict", '{"signature_name": "mixed", "inputs": [1]}', 400,
     "inputs is a plain value/list, but expecting an object as multiple input tensors required as per "
     "tensorinfo_map"),
    ("types:predict", '{"signature_name": "echo_float", "inputs": [[1.0], 2.0]}', 400,
     "JSON Value: 2.0 found at incorrect level: 2 in the JSON DOM. Expected at level: 2"),
    ("types:predict", '{"signature_name": "echo_float", "inputs": [[1.0], [[2.0]]]}', 400,
     "Encountered list at unexpected level: 2 expected < 2"),
    ("types:predict", '{"signature_name": "echo_float", "inputs": [[1.0, 2.0], [3.0]]}', 400,
     "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
    ("hpt:predict", '{"signature_name": "nope", "instances": [1.0]}', 400,
     'Serving signature name: "nope" not found in signature def'),
    ("hpt:predict", '{"signature_name": 7, "instances": [1.0]}', 400,
     "JSON Value: {\n    \"signature_name\": 7,\n    \"instances\": [1.0]\n} not formatted correctly. "
     "'signature_name' key must be a string value."),
    ("hpt:predict", '{"instances": [1.0], "inputs": [1.0]}', 400,
     "JSON Value: {\n    \"instances\": [1.0],\n    \"inputs\": [1.0]\n} Not formatted correctly "
     "expecting only one of 'inputs' or 'instances' keys to exist "),
    ("hpt:predict", '{"instances": 1}', 400,
     "JSON Value: {\n    \"instances\": 1\n} Expecting 'instances' to be an list/array"),
    ("hpt:predict", '{"signature_name": ""}', 400, "Missing 'inputs' or 'instances' key"),
    ("nope:predict", '{"instances": [1.0]}', 404, "Servable not found for request: Latest(nope)"),
    ("nope:predict", '{"instances": [1.0', 400,
     "JSON Parse error: Missing a comma or ']' after an array element. at offset: 18"),
    ("two/versions/7:predict", '{"instances": [1.0]}', 404,
     "Servable not found for request: Specific(two, 7)"),
    ("hpt:regress", '{"examples": [{"x": 1.0}]}', 400,
     "Expected regression signature method_name to be tensorflow/serving/regress. Was: "
     "tensorflow/serving/predict"),
    ("hpt:classify", '{"signature_name": "nope", "examples": [{"x": 1.0}]}', 400,
     "No signature was found with the name: nope"),
    ("hpt:regress", '{"signature_name": "regress_x_to_y"}', 400,
     "JSON Value: {\n    \"signature_name\": \"regress_x_to_y\"\n} When method is classify, key 'examples' "
     "is expected and was not found"),
    ("nope:regress", '{"examples": {}}', 400,
     "JSON Value: {\n    \"examples\": {}\n} Expecting 'examples' value to be an list/array"),
    ("hpt:regress", '{"examples": [1]}', 400, "Example must be JSON object but got JSON Number"),
    ("hpt:regress", '{"context": [], "examples": [{"x": 1.0}]}', 400,
     "Example must be JSON object but got JSON Array"),
    ("hpt:regress", '{"examples": [{"x": [1.0, "a"]}]}', 400,
     "Unexpected element type in feature: x expecting type: float"),
    ("hpt:regress", '{"examples": [{"x": null}]}', 400,
     "Feature: x has element with unexpected JSON type: Null"),
    ("hpt:regress", '{"examples": [{"x": 18446744073709551615}]}', 400,
     "Feature: x has uint64_t element. Only int64_t is supported."),
])
def test_checks_in_tf_servings_order_and_words(client: Any, path: str, body: str, status: int,
                                               error: str) -> None:
    assert raw(client, f"/v1/models/{path}", body) == (status, pretty_error(error))


def test_quoted_bodies_are_cut_as_json_writer_with_limit_cuts_them(client: Any) -> None:
    # JsonValueToDebugString: each write is allowed while fewer than 256 bytes are out, so the
    # quote stops after the first value that crosses 256 (here the 43rd: 258 bytes).
    body = '{"signature_name": 1, "instances": [' + ", ".join(["1.0"] * 100) + "]}"
    quoted = '{\n    "signature_name": 1,\n    "instances": [1.0' + ", 1.0" * 42
    assert len(quoted) == 258
    assert raw(client, "/v1/models/hpt:predict", body) == (400, pretty_error(
        f"JSON Value: {quoted} not formatted correctly. 'signature_name' key must be a string value."))


# -- 5. the same bytes out: status and metadata (protobuf's JSON printer) -----------------------

def version_status(number: str) -> str:
    return ('  {\n   "version": "' + number + '",\n   "state": "AVAILABLE",\n   "status": {\n'
            '    "error_code": "OK",\n    "error_message": ""\n   }\n  }')


def test_status_bytes(client: Any) -> None:
    assert raw(client, "/v1/models/hpt") == (200, (
        '{\n "model_version_status": [\n' + version_status("123") + "\n ]\n}\n").encode())
    assert raw(client, "/v1/models/two") == (200, (  # newest first, as ServableStateMonitor orders them
        '{\n "model_version_status": [\n' + version_status("2") + ",\n" + version_status("1")
        + "\n ]\n}\n").encode())
    assert raw(client, "/v1/models/two/versions/9") == (
        404, pretty_error("Could not find version 9 of model two"))


def test_metadata_bytes(client: Any) -> None:
    status, body = raw(client, "/v1/models/hpt/metadata")
    text = body.decode()
    assert status == 200
    assert text.startswith(
        '{\n"model_spec":{\n "name": "hpt",\n "signature_name": "",\n "version": "123"\n}\n,\n'
        '"metadata": {"signature_def": {\n "signature_def": {\n  "classify_x_to_y": {\n   "inputs": {\n'
        '    "inputs": {\n     "dtype": "DT_STRING",\n     "tensor_shape": {\n      "dim": [\n       {\n'
        '        "size": "-1",\n        "name": ""\n       }\n      ],\n      "unknown_rank": false\n'
        '     },\n     "name": "tf_example:0"\n    }\n   },\n')
    assert '   "method_name": "tensorflow/serving/classify",\n   "defaults": {}\n  },\n' in text
    assert text.endswith(
        '   "method_name": "tensorflow/serving/predict",\n   "defaults": {}\n  }\n }\n}\n}\n}\n')
    assert json.loads(text)["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["x"][
        "tensor_shape"]["dim"] == [{"size": "-1", "name": ""}, {"size": "1", "name": ""}]


# -- 6. paths ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "status", "body"), [
    ("GET", "/v1/anything/else", 400, pretty_error("Malformed request: GET /v1/anything/else")),
    ("POST", "/v1/models/hpt:explain", 400, pretty_error("Malformed request: POST /v1/models/hpt:explain")),
    ("DELETE", "/v1/models/hpt", 400, pretty_error("Malformed request: DELETE /v1/models/hpt")),
    ("GET", "/v1/models/hpt/versions/x", 400,
     pretty_error("Malformed request: GET /v1/models/hpt/versions/x")),
])
def test_paths_tf_serving_does_not_route(client: Any, method: str, path: str, status: int,
                                        body: bytes) -> None:
    response = client.open(path, method=method, data="{}")
    assert (response.status_code, response.data) == (status, body)


def test_paths_under_projects_keep_ml_v1_rules(client: Any) -> None:
    response = client.get("/v1/projects/p/nothing/here")
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == 404  # ml v1's Google error object
