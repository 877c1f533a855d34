"""An integer too long for a double, given to a float input: never a 500.

TF Serving's rapidjson refuses it while parsing (reader.h ParseNumber, kParseErrorNumberTooBig
at the number's first character), as it does `1e400`; AI Platform :predict reads it as `1e400`
reads: an infinite float."""

import pytest

from tests.kit import modelkit, tfmodels

BIG = b"1" + b"0" * 400  # 401 digits: past DBL_MAX (309 digits), short of Python's 4,300 cap


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from app import create_app
    from core.settings import Settings

    root = tmp_path_factory.mktemp("range")
    tfmodels.tf1_static(root / "tf1")
    boot = modelkit.bootstrap_file(root / "boot.yaml", {"t": {"versions": {"v1": {
        "deploymentUri": str(root / "tf1"), "framework": "TENSORFLOW"}}}}, project="p")
    return create_app(Settings(state_dir=root / "state", config_file=boot), warm=False).test_client()


def post(client, path, body):
    return client.post(path, data=body, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("sign", [b"", b"-"])
def test_tf_serving_refuses_it_where_the_number_starts(client, sign):
    body = b'{"instances": [[1.0, 2.0, ' + sign + BIG + b"]]}"
    answer = post(client, "/v1/models/t:predict", body)
    assert answer.status_code == 400, answer.data
    assert answer.get_json() == {
        "error": "JSON Parse error: Number too big to be stored in double. at offset: 26"}
    # The same as a number whose exponent is past a double's range.
    answer = post(client, "/v1/models/t:predict", b'{"instances": [[1.0, 2.0, ' + sign + b"1e400]]}")
    assert answer.get_json() == {
        "error": "JSON Parse error: Number too big to be stored in double. at offset: 26"}


def test_tf_serving_names_the_first_too_big_number(client):
    body = b'{"instances": [[1.0, ' + b"9" * 300 + b", " + BIG + b"]]}"  # 300 digits still fit
    answer = post(client, "/v1/models/t:predict", body)
    assert answer.status_code == 400, answer.data
    assert answer.get_json()["error"].endswith(f"at offset: {body.index(BIG)}")


@pytest.mark.parametrize(("sign", "value"), [(b"", "Infinity"), (b"-", "-Infinity")])
def test_ai_platform_reads_it_as_an_infinite_float(client, sign, value):
    big = post(client, "/v1/projects/p/models/t:predict",
               b'{"instances": [[1.0, 2.0, ' + sign + BIG + b"]]}")
    exponent = post(client, "/v1/projects/p/models/t:predict",
                    b'{"instances": [[1.0, 2.0, ' + sign + b"1e400]]}")
    assert big.status_code == 200, big.data
    assert big.data == exponent.data
    assert f"{value}]".encode() in big.data
