"""hf_check.py DIR: checks a Hugging Face llama-family directory with torch
alone (no mstore code): config.json parses and its shapes agree with
model.safetensors' tensors, which torch reads from the file's own header;
prints JSON: the tensor names and, for q_proj/k_proj, the SHA-256 of the
weight permuted as llama.cpp's convert_hf_to_gguf.py does (LlamaModel.permute),
which must be the bytes of the GGUF tensor the directory came from."""
import hashlib, json, os, struct, sys
import torch

d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
raw = open(os.path.join(d, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
header.pop("__metadata__", None)
dtypes = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32}
tensors = {}
for name, info in header.items():
    a, b = info["data_offsets"]
    t = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    tensors[name] = t

h, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
hd = cfg.get("head_dim", h // heads)
want = {"model.embed_tokens.weight": [cfg["vocab_size"], h], "model.norm.weight": [h]}
for i in range(cfg["num_hidden_layers"]):
    p = "model.layers.%d." % i
    want.update({p + "self_attn.q_proj.weight": [heads * hd, h], p + "self_attn.k_proj.weight": [kv * hd, h],
                 p + "self_attn.v_proj.weight": [kv * hd, h], p + "self_attn.o_proj.weight": [h, heads * hd],
                 p + "mlp.gate_proj.weight": [cfg["intermediate_size"], h], p + "mlp.up_proj.weight": [cfg["intermediate_size"], h],
                 p + "mlp.down_proj.weight": [h, cfg["intermediate_size"]],
                 p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h]})
    for n, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
        if p + "self_attn.%s_proj.bias" % n in tensors:
            want[p + "self_attn.%s_proj.bias" % n] = [rows]
if not cfg.get("tie_word_embeddings"):
    want["lm_head.weight"] = [cfg["vocab_size"], h]
for name, shape in want.items():
    if name not in tensors:
        sys.exit("missing tensor %s" % name)
    if list(tensors[name].shape) != shape:
        sys.exit("%s has shape %s, config.json says %s" % (name, list(tensors[name].shape), shape))
extra = set(n for n in tensors if not n.endswith(".rotary_emb.inv_freq")) - set(want)
if extra:
    sys.exit("tensors config.json does not account for: %s" % sorted(extra))

def permute(w, n_head, n_head_kv):
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

out = {"names": sorted(tensors), "permuted": {}}
for name, t in tensors.items():
    if cfg["architectures"][0] not in ("LlamaForCausalLM", "MistralForCausalLM"):
        continue
    if name.endswith("q_proj.weight"):
        p = permute(t, heads, heads)
    elif name.endswith("k_proj.weight"):
        p = permute(t, heads, kv)
    else:
        continue
    out["permuted"][name] = hashlib.sha256(p.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
print(json.dumps(out))
