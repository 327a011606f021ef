"""Minimal .safetensors reader and writer (json + numpy), so the reference needs no `safetensors` package.

Layout: an 8-byte little-endian header length N, N bytes of JSON
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
then the raw little-endian tensor bytes (offsets relative to the end of the header).
Reads F64, F32, F16, BF16, I64, I32, U8; writes F64, F32, I64, I32.
Errors name the file and the tensor: ValueError("file.safetensors: tensor 'x' ...").
"""

import json
import struct

import numpy as np
import torch

_NUMPY_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "U8": np.dtype("u1"),
}
_TORCH_TO_SAFETENSORS = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}


def _bf16_to_float32(raw):
    # bf16 is the top half of a float32: widening is a 16-bit shift, exact.
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path):
    """Returns ({name: torch.Tensor}, metadata dict). BF16 is widened to float32 (exactly)."""
    with open(path, "rb") as file:
        blob = file.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors header ({len(blob)} bytes)")
    (header_size,) = struct.unpack("<Q", blob[:8])
    if 8 + header_size > len(blob):
        raise ValueError(f"{path}: header length {header_size} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8 : 8 + header_size].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: header is not valid JSON ({error})") from None
    data = memoryview(blob)[8 + header_size :]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor '{name}' data_offsets {begin}..{end} outside the {len(data)}-byte buffer")
        if dtype == "BF16":
            element_size = 2
        elif dtype in _NUMPY_DTYPES:
            element_size = _NUMPY_DTYPES[dtype].itemsize
        else:
            raise ValueError(f"{path}: tensor '{name}' has dtype {dtype}, expected one of BF16, {', '.join(_NUMPY_DTYPES)}")
        if end - begin != count * element_size:
            raise ValueError(f"{path}: tensor '{name}' has {end - begin} bytes, expected {count * element_size} for {dtype} {shape}")
        raw = data[begin:end]
        if dtype == "BF16":
            array = _bf16_to_float32(np.frombuffer(raw, dtype="<u2"))
        else:
            array = np.frombuffer(raw, dtype=_NUMPY_DTYPES[dtype]).astype(_NUMPY_DTYPES[dtype].newbyteorder("="))
        tensors[name] = torch.from_numpy(array.copy().reshape(shape))
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (float64/float32/int64/int32) in name order, header padded to 8 bytes."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        if tensor.dtype not in _TORCH_TO_SAFETENSORS:
            raise ValueError(f"{path}: tensor '{name}' has dtype {tensor.dtype}, cannot write it")
        raw = tensor.numpy().astype(tensor.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": _TORCH_TO_SAFETENSORS[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(key): str(value) for key, value in metadata.items()}
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)))
        file.write(encoded)
        for chunk in chunks:
            file.write(chunk)
