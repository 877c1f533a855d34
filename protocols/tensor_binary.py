"""The binary form of tensors: V2's binary tensor data extension (REST) and gRPC's raw contents.

Elements are flattened in row-major order,
little-endian; BYTES elements each prefixed with a 4-byte little-endian length. FP16 and BF16 exist
only in binary form. BF16 has no numpy dtype: it is widened to float32 on input (the high 16 bits
of a float32) and narrowed by truncation on output.
"""

from __future__ import annotations

import struct

import numpy as np

from core.errors import InvalidArgument
from protocols.tensors import NUMPY_DTYPES, Tensor, element_count

#: Datatypes whose item size differs from their decoded numpy dtype's (BF16 decodes to float32).
_ITEMSIZE = {"BF16": 2}


def from_binary(name: str, datatype: str, shape: tuple[int, ...], raw: bytes) -> Tensor:
    """A tensor from its binary form (little-endian; BYTES length-prefixed)."""
    where = f"input '{name}'"
    expected = element_count(shape)
    if datatype == "BYTES":
        # The elements present are counted before anything is allocated for the shape's count
        # (a [50000000] shape in a 100-byte request).
        items = deserialize_bytes(raw, expected, where)
        array = np.empty(len(items), dtype=np.object_)
        array[:] = items
        return Tensor(name, datatype, array.reshape(shape))
    itemsize = _ITEMSIZE.get(datatype) or np.dtype(NUMPY_DTYPES[datatype]).itemsize
    if len(raw) != expected * itemsize:
        raise InvalidArgument(
            f"{where}: shape {list(shape)} of {datatype} needs {expected * itemsize} bytes of "
            f"binary data, got {len(raw)}."
        )
    if datatype == "BF16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return Tensor(name, datatype, halves.view(np.float32).reshape(shape))
    little = np.dtype(NUMPY_DTYPES[datatype]).newbyteorder("<")
    array = np.frombuffer(raw, dtype=little).astype(NUMPY_DTYPES[datatype], copy=False)
    return Tensor(name, datatype, array.reshape(shape))


def deserialize_bytes(raw: bytes, count: int, where: str) -> list[bytes]:
    items: list[bytes] = []
    offset = 0
    view = memoryview(raw)
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise InvalidArgument(f"{where}: truncated BYTES element length at byte {offset}.")
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise InvalidArgument(
                f"{where}: BYTES element {len(items)} declares {length} bytes but only "
                f"{len(raw) - offset} remain."
            )
        items.append(bytes(view[offset:offset + length]))
        offset += length
    if len(items) != count:
        raise InvalidArgument(f"{where}: expected {count} BYTES elements, binary data holds {len(items)}.")
    return items


def to_binary(tensor: Tensor) -> bytes:
    """The binary form of an output tensor."""
    if tensor.datatype == "BYTES":
        parts = []
        for item in tensor.data.reshape(-1):
            data = item if isinstance(item, bytes) else str(item).encode()
            parts.append(struct.pack("<I", len(data)) + data)
        return b"".join(parts)
    if tensor.datatype == "BF16":
        bits = np.ascontiguousarray(tensor.data, dtype=np.float32).view(np.uint32) >> 16
        return bits.astype("<u2").tobytes()
    dtype = np.dtype(NUMPY_DTYPES[tensor.datatype]).newbyteorder("<")
    return np.ascontiguousarray(tensor.data, dtype=dtype).tobytes()
