// The hfconv_*.go files convert between the Hugging Face layout of a llama-family
// model (config.json, SafeTensors tensor names, tokenizer.json /
// tokenizer.model / tokenizer_config.json) and what llama.cpp reads from a
// GGUF file, as llama.cpp's convert_hf_to_gguf.py does for the
// architectures LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM:
//
//   - tensor names (names.go): model.layers.N.self_attn.q_proj.weight ↔
//     blk.N.attn_q.weight, …; rotary inv_freq buffers are dropped;
//   - the q/k row permutation of llama and mistral (permute.go), which
//     turns HF's rotate-half rotary layout into GGML's interleaved one,
//     and its inverse; qwen2 is not permuted;
//   - 1-D tensors (norm weights, biases) in F32, which ggml's kernels need;
//   - the hyper-parameters (hparams.go) between config.json and
//     "<arch>.*" key/values;
//   - the tokenizer (spm.go, bpe.go, special.go) between tokenizer.model
//     (SentencePiece protobuf, read and written with protowire) or
//     tokenizer.json (byte-level BPE) plus tokenizer_config.json and
//     tokenizer.ggml.* key/values; back from a SentencePiece GGUF a
//     tokenizer.json is written too, as transformers' LlamaConverter makes
//     it (spmjson.go), for tokenizer implementations that read only that.
//
// Where the converter reads more than these files (generation_config.json,
// added_tokens.json, tokenizer.chat_template.<name> of template lists, a
// README.md model card's name), these files do not. llama3 rope scaling
// is the rope_freqs tensor the converter generates (hfconv_rope.go);
// general.name is made as the converter's metadata heuristics make it,
// from _name_or_path or the model directory's name (the ref checked out). A SentencePiece directory without tokenizer.json
// resolves tokenizer_config.json's special tokens in the vocabulary itself
// (the converter would fall back to config.json's ids only).
//
// tokenizer.ggml.pre: the Python converter hashes what the HF tokenizer
// makes of a fixed text and looks the hash up in a table. Running an HF
// tokenizer is out of reach of a static binary, so these files look up
// the pre-tokenizer that tokenizer.json declares (its Split regexes and
// ByteLevel settings) in a table of the ones llama.cpp implements
// (knownPre); a declaration not in the table is refused, as the converter
// refuses an unknown hash.
//
// They do no I/O: they map bytes they are given. The checkout planners
// use them: PlanCheckout (HF SafeTensors → GGUF, checkout_hf.go) and
// Export (GGUF → an HF SafeTensors directory).

package gguf
