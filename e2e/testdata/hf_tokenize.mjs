// hf_tokenize.mjs PKG DIR TEXT: tokenizes TEXT with the Hugging Face
// tokenizer of DIR (tokenizer.json, tokenizer_config.json) in
// @huggingface/tokenizers (pure JS), without special tokens added; prints
// the ids as JSON.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [pkg, dir, text] = process.argv.slice(2);
const {Tokenizer} = await import(pathToFileURL(path.join(pkg, "dist", "tokenizers.mjs")).href);
const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const tc = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tj, tc);
console.log(JSON.stringify(tok.encode(text, {add_special_tokens: false}).ids));
