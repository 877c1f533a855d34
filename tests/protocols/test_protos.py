"""protos/*.proto interoperate with the real clients: same package, names and field numbers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.protobuf import descriptor
from tritonclient.grpc import service_pb2

from protocols.proto_modules import grpc_predict_v2_pb2, grps_pb2


def fields(message: Any) -> dict[str, tuple[int, int, bool, str]]:
    # is_repeated() rather than the deprecated `label` (proto3 has no required fields).
    return {f.name: (f.number, f.type, f.is_repeated, f.message_type.full_name if f.message_type else "")
            for f in message.fields}


def all_messages(file: descriptor.FileDescriptor) -> list[Any]:
    found = []
    pending = list(file.message_types_by_name.values())
    while pending:
        message = pending.pop()
        found.append(message)
        pending.extend(message.nested_types)
    return found


def test_v2_proto_matches_tritons_grpc_service() -> None:
    ours = grpc_predict_v2_pb2.DESCRIPTOR
    theirs = service_pb2.DESCRIPTOR
    assert ours.package == theirs.package == "inference"
    compared = 0
    for message in all_messages(ours):
        reference = theirs.pool.FindMessageTypeByName(message.full_name)
        assert fields(message) == {k: v for k, v in fields(reference).items() if k in fields(message)}
        assert set(fields(message)) <= set(fields(reference)), message.full_name
        compared += 1
    assert compared >= 20
    service = ours.services_by_name["GRPCInferenceService"]
    reference = theirs.services_by_name["GRPCInferenceService"]
    for method in service.methods:
        other = reference.methods_by_name[method.name]
        assert (method.input_type.full_name, method.output_type.full_name) == (
            other.input_type.full_name, other.output_type.full_name)
    assert [m.name for m in service.methods] == [
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer"]


#: NetEase-Media/grps apis/grps_apis/grps.proto, transcribed: message -> field -> number.
GRPS_FIELDS = {
    "GenericTensor": {"name": 1, "dtype": 2, "shape": 3, "flat_uint8": 4, "flat_int8": 5,
                      "flat_int16": 6, "flat_int32": 7, "flat_int64": 8, "flat_float16": 9,
                      "flat_float32": 10, "flat_float64": 11, "flat_string": 12},
    "GenericTensorData": {"tensors": 1},
    "NDArrayData": {},
    "GenericMapData": {"s_s": 1, "s_b": 2, "s_i32": 3, "s_i64": 4, "s_f": 5, "s_d": 6},
    "GrpsMessage": {"status": 1, "model": 2, "bin_data": 3, "str_data": 4, "gtensors": 5,
                    "ndarray": 6, "gmap": 7},
    "Status": {"code": 1, "msg": 2, "status": 3},
    "EmptyGrpsMessage": {},
}
GRPS_DTYPES = ["DT_INVALID", "DT_UINT8", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64",
               "DT_FLOAT16", "DT_FLOAT32", "DT_FLOAT64", "DT_STRING"]


def test_grps_proto_matches_upstream() -> None:
    file = grps_pb2.DESCRIPTOR
    assert file.package == "grps.protos.v1"
    for name, expected in GRPS_FIELDS.items():
        message = file.message_types_by_name[name]
        assert {f.name: f.number for f in message.fields} == expected, name
    assert [v.name for v in file.enum_types_by_name["DataType"].values] == GRPS_DTYPES
    assert [v.number for v in file.enum_types_by_name["DataType"].values] == list(range(10))
    assert [v.name for v in grps_pb2.Status.StatusFlag.DESCRIPTOR.values] == [
        "UNKNOWN", "SUCCESS", "FAILURE"]
    service = file.services_by_name["GrpsService"]
    assert [(m.name, m.server_streaming) for m in service.methods] == [
        ("Predict", False), ("PredictStreaming", True), ("Online", False), ("Offline", False),
        ("CheckLiveness", False), ("CheckReadiness", False), ("ServerMetadata", False),
        ("ModelMetadata", False)]
    oneof = file.message_types_by_name["GrpsMessage"].oneofs_by_name["data_oneof"]
    assert [f.name for f in oneof.fields] == ["bin_data", "str_data", "gtensors", "ndarray", "gmap"]


def test_missing_generated_modules_fail_with_the_build_command(tmp_path: Path) -> None:
    """Generation is a build step (`make protos`), never an import side effect: in a checkout
    without protocols/_generated, importing a gRPC adapter names the command and writes nothing."""
    root = Path(__file__).resolve().parents[2]
    copy = tmp_path / "checkout"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venvs", "_generated", "tests", "__pycache__", "*.pyc", ".*_cache"))
    out = subprocess.run([sys.executable, "-c", "import protocols.grps_grpc"], cwd=copy,
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "ModuleNotFoundError" in out.stderr and "make protos" in out.stderr
    assert not (copy / "protocols" / "_generated").exists()
