"""Checks an ONNX model as onnx itself reads it: onnx.load with its external
data, then onnx.checker.check_model. Prints one JSON object:
{"checked": bool, "why": str, "initializers": n,
 "external": [[name, location, offset, length], ...]}.
"checked" is false (with "why") when the model is newer than this onnx's
checker knows; loading must still succeed. Exits non-zero on any failure.

usage: onnx_check.py MODEL.onnx
"""
import json
import sys

import onnx
from onnx import external_data_helper


def graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from graphs(a.g)
            for sg in a.graphs:
                yield from graphs(sg)


def main(path):
    bare = onnx.load(path, load_external_data=False)
    external = []
    count = 0
    for g in graphs(bare.graph):
        for t in g.initializer:
            count += 1
            if external_data_helper.uses_external_data(t):
                info = external_data_helper.ExternalDataInfo(t)
                external.append([t.name, info.location, int(info.offset or 0), int(info.length or 0)])

    model = onnx.load(path)  # reads every external tensor, or raises
    for g in graphs(model.graph):
        for t in g.initializer:
            if external_data_helper.uses_external_data(t) and not t.HasField("raw_data"):
                raise SystemExit("%s: external data not loaded" % t.name)

    newest_opset = onnx.defs.onnx_opset_version()
    opset = max([o.version for o in bare.opset_import if o.domain in ("", "ai.onnx")] or [0])
    out = {"checked": False, "why": "", "initializers": count, "external": external}
    if bare.ir_version > onnx.IR_VERSION:
        out["why"] = "ir_version %d is newer than this onnx (%s) checks (%d)" % (bare.ir_version, onnx.__version__, onnx.IR_VERSION)
    elif opset > newest_opset:
        out["why"] = "opset %d is newer than this onnx (%s) checks (%d)" % (opset, onnx.__version__, newest_opset)
    else:
        onnx.checker.check_model(path)  # by path: external data resolved beside it
        onnx.checker.check_model(model)
        out["checked"] = True
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
