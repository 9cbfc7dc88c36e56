"""Report what torch.load(weights_only=True) reads from PyTorch checkpoints.

Usage: torch_dump.py FILE...  Prints one JSON object: for each FILE, its
state-dict tensors (names joined with ".", as mstore names them) with their
dtype in mstore's names, shape and the SHA-256 of their bytes made
contiguous; or the error torch raised.

Debian's torch 1.13 has no BINFLOAT in its weights_only loader: a file that
needs it is read by torch.load with a restricted pickle module instead (only
the tensor-rebuilding globals; "loader": "restricted"), so the tensors still
come from torch itself.

With --save-views OUT, writes instead a checkpoint whose tensors share
storages and are strided (torch.save), for the tests to add.
"""

import collections
import hashlib
import json
import pickle
import sys
import types

import torch

DTYPES = {
    torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL", torch.complex64: "C64",
}

ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): torch._utils._rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): torch._utils._rebuild_parameter,
}


class Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in ALLOWED:
            return ALLOWED[(module, name)]
        raise pickle.UnpicklingError("refused global %s.%s" % (module, name))


restricted = types.ModuleType("restricted_pickle")
restricted.Unpickler = Restricted


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True), "weights_only"
    except Exception as e:
        if "Unsupported operand 71" not in str(e):  # 71 is BINFLOAT
            raise
    return torch.load(path, map_location="cpu", pickle_module=restricted), "restricted"


def flatten(obj, name, out, root):
    if isinstance(obj, torch.Tensor):
        out[name] = obj
        return
    if isinstance(obj, dict):
        items = [(str(k), v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(obj)]
    else:
        return
    for k, v in items:
        flatten(v, k if root else name + "." + k, out, False)


def describe(t):
    data = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "sha256": hashlib.sha256(data).hexdigest()}


def save_views(out):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    half = torch.arange(10, dtype=torch.float16)
    state = collections.OrderedDict()
    state["base"] = base
    state["tied"] = base  # the same tensor under a second name
    state["transposed"] = base.t()
    state["row"] = base[2]
    state["column"] = base[:, 1]
    state["half.evens"] = half[::2]
    state["half.tail"] = half[6:]
    state["ints"] = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int64).t()
    state["param"] = torch.nn.Parameter(torch.ones(3, 2))
    torch.save(state, out)


def main():
    if sys.argv[1] == "--save-views":
        save_views(sys.argv[2])
        return
    report = {}
    for path in sys.argv[1:]:
        try:
            obj, loader = load(path)
            tensors = {}
            flatten(obj, "", tensors, True)
            report[path] = {"loader": loader, "tensors": {k: describe(v) for k, v in tensors.items()}}
        except Exception as e:
            report[path] = {"error": "%s: %s" % (type(e).__name__, e)}
    json.dump(report, sys.stdout)


main()
