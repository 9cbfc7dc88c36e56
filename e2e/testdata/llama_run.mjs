// llama_run.mjs PKG SPEC: loads GGUF models in llama.cpp through
// node-llama-cpp (its prebuilt CPU binary; nothing is downloaded or built)
// and prints, per model, one JSON line: the tokens llama.cpp makes of
// spec.text (special tokens parsed, no BOS added) and, unless the model is
// loaded vocabulary-only, the greedy continuation of the BOS + text with
// a SHA-256 of each step's full next-token probability list (softmax of
// the logits: equal digests mean equal logits) and its top 3.
// SPEC is JSON: {"text": "...", "steps": N, "models": [{"path": "...", "vocabOnly": bool}]}.
import {createHash} from "node:crypto";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkg, specJSON] = process.argv.slice(2);
const spec = JSON.parse(specJSON);
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(path.join(pkg, "dist", "index.js")).href);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: LlamaLogLevel.error});

for (const m of spec.models) {
    const out = {path: m.path};
    const model = await llama.loadModel({modelPath: m.path, vocabOnly: !!m.vocabOnly});
    out.tokens = Array.from(model.tokenize(spec.text, true));
    if (!m.vocabOnly && spec.steps > 0) {
        const context = await model.createContext({contextSize: 64, threads: 1, batchSize: 64});
        const seq = context.getSequence();
        const input = [model.tokens.bos, ...out.tokens].filter((t) => t != null);
        out.greedy = [];
        out.steps = [];
        const gen = seq.evaluateWithMetadata(input, {probabilities: true}, {temperature: 0});
        for await (const step of gen) {
            out.greedy.push(step.token);
            const probs = [...step.probabilities.entries()].sort((a, b) => a[0] - b[0]);
            const buf = Buffer.alloc(probs.length * 8);
            probs.forEach(([tok, p], i) => { buf.writeUInt32LE(tok, 8 * i); buf.writeFloatLE(p, 8 * i + 4); });
            const top = [...step.probabilities.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3);
            out.steps.push({sha256: createHash("sha256").update(buf).digest("hex"), n: probs.length, top});
            if (out.greedy.length >= spec.steps) break;
        }
        await context.dispose();
    }
    await model.dispose();
    console.log(JSON.stringify(out));
}
await llama.dispose();
