"""grps over gRPC to a TensorFlow SavedModel (issue 34, item 9), with the stubs generated from
grps.proto: unnamed tensors are the signature's inputs by position, as grps's TfModelInferer
feeds them (NetEase-Media/grps server/cpp_server/src/model_infer/tf_inferer.cc, Infer)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from protocols.proto_modules import grps_pb2, grps_pb2_grpc
from tests.conftest import LiveServer, stop_server
from tests.protocols.conftest import build_models, start_protocol_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("grps-tf")
    live: LiveServer = start_protocol_server((root, build_models(root, tensorflow=True)))
    try:
        assert live.grpc_target
        with grpc.insecure_channel(live.grpc_target) as channel:
            yield grps_pb2_grpc.GrpsServiceStub(channel)
    finally:
        stop_server(live.proc)


def tensor(name: str, shape: list[int], values: list[float]) -> Any:
    return grps_pb2.GenericTensor(name=name, dtype=grps_pb2.DataType.DT_FLOAT32, shape=shape,
                                  flat_float32=values)


def test_unnamed_tensors_are_the_inputs_in_order(stub: Any) -> None:
    """tf2's serving_default: a [-1, 2], b [-1] -> total = sum(a) + b, scaled = a * b."""
    request = grps_pb2.GrpsMessage(model="tf2")
    request.gtensors.tensors.extend([tensor("", [2, 2], [1.0, 2.0, 3.0, 4.0]),
                                     tensor("", [2], [10.0, 0.5])])
    answer = stub.Predict(request, timeout=30)
    assert answer.status.status == grps_pb2.Status.SUCCESS, answer.status.msg
    outputs = {t.name: list(t.flat_float32) for t in answer.gtensors.tensors}
    assert outputs == {"scaled": [10.0, 20.0, 1.5, 2.0], "total": [13.0, 7.5]}
    # the same tensors named answer the same
    named = grps_pb2.GrpsMessage(model="tf2")
    named.gtensors.tensors.extend([tensor("a", [2, 2], [1.0, 2.0, 3.0, 4.0]),
                                   tensor("b", [2], [10.0, 0.5])])
    assert stub.Predict(named, timeout=30).gtensors == answer.gtensors


def test_a_name_the_model_lacks(stub: Any) -> None:
    request = grps_pb2.GrpsMessage(model="tf2")
    request.gtensors.tensors.extend([tensor("a", [1, 2], [1.0, 2.0]), tensor("x", [1], [1.0])])
    answer = stub.Predict(request, timeout=30)
    assert answer.status.status == grps_pb2.Status.FAILURE
    assert answer.status.msg == "Failed to infer model, error: input name x not defined in model"
