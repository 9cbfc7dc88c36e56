// Runs an ONNX model in ONNX Runtime (onnxruntime-node, CPU, one thread) on
// inputs made deterministically from the model's input metadata, and prints
// its outputs as JSON: {name: {type, dims, hex}}, hex being the output's
// bytes, so that two runs can be compared bit for bit.
//
// usage: node ort_run.js ORT_PACKAGE_DIR MODEL.onnx [SPEC_JSON]
// SPEC_JSON: {"dims": {"batch": 1, ...}, "values": {"sr": 16000}} gives the
// symbolic dimensions (default 1) and fills inputs with a constant.
'use strict';
const ort = require(process.argv[2]);

const typed = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array,
  int64: BigInt64Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

function input(meta, spec) {
  const dims = meta.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : (spec.dims || {})[d] ?? 1));
  const n = dims.reduce((a, b) => a * b, 1);
  const Ctor = typed[meta.type];
  if (!Ctor) throw new Error(`input ${meta.name}: type ${meta.type} not handled`);
  const data = new Ctor(n);
  const fixed = (spec.values || {})[meta.name];
  for (let i = 0; i < n; i++) {
    const v = fixed !== undefined ? fixed : Math.sin(i * 0.37 + meta.name.length) * 0.5;
    data[i] = Ctor === BigInt64Array ? BigInt(Math.round(v)) : (Ctor === Float32Array || Ctor === Float64Array ? v : Math.round(v * 100));
  }
  return new ort.Tensor(meta.type, data, dims);
}

(async () => {
  const spec = JSON.parse(process.argv[4] || '{}');
  const session = await ort.InferenceSession.create(process.argv[3], {
    intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3,
  });
  const feeds = {};
  for (const meta of session.inputMetadata) feeds[meta.name] = input(meta, spec);
  const results = await session.run(feeds);
  const out = {};
  for (const name of Object.keys(results).sort()) {
    const t = results[name];
    const d = t.data;
    out[name] = { type: t.type, dims: t.dims, hex: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('hex') };
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
