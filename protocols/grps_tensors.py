"""grps tensors: its DataType enum against the V2 datatypes protocols/tensors.py decodes to.

grps's GenericTensor (protos/grps.proto, NetEase-Media/grps) carries a tensor's values flat in
one typed `flat_*` field per DataType; these tables pick the field and the datatype both ways.
"""

from __future__ import annotations

from typing import Any

from protocols.tensors import NUMPY_DTYPES, Tensor, to_values

#: grps DataType -> (V2 datatype, the GenericTensor field holding its flat values).
GRPS_DTYPES = {
    "DT_UINT8": ("UINT8", "flat_uint8"), "DT_INT8": ("INT8", "flat_int8"),
    "DT_INT16": ("INT16", "flat_int16"), "DT_INT32": ("INT32", "flat_int32"),
    "DT_INT64": ("INT64", "flat_int64"), "DT_FLOAT16": ("FP16", "flat_float16"),
    "DT_FLOAT32": ("FP32", "flat_float32"), "DT_FLOAT64": ("FP64", "flat_float64"),
    "DT_STRING": ("BYTES", "flat_string"),
}
#: V2 datatype -> grps DataType of an output; types grps lacks are widened (BOOL as 0/1 bytes).
GRPS_OUTPUT_DTYPES = {
    "BOOL": "DT_UINT8", "UINT8": "DT_UINT8", "UINT16": "DT_INT32", "UINT32": "DT_INT64",
    "UINT64": "DT_INT64", "INT8": "DT_INT8", "INT16": "DT_INT16", "INT32": "DT_INT32",
    "INT64": "DT_INT64", "FP16": "DT_FLOAT16", "BF16": "DT_FLOAT32", "FP32": "DT_FLOAT32",
    "FP64": "DT_FLOAT64", "BYTES": "DT_STRING",
}


def to_flat(tensor: Tensor, datatype: str | None = None) -> list[Any]:
    """Flat Python values of a tensor, cast to `datatype` (BYTES elements as UTF-8 str)."""
    if (datatype or tensor.datatype) == "BYTES":
        return to_values(Tensor(tensor.name, "BYTES", tensor.data))
    target = NUMPY_DTYPES[datatype or tensor.datatype]
    return list(tensor.data.astype(target).reshape(-1).tolist())
