// Package ollama is Ollama's models folder (`--layout ollama`, what
// OLLAMA_MODELS points at), as ollama's server/manifest.go and
// types/model/name.go keep it:
//
//	MODELS/manifests/HOST/NAMESPACE/MODEL/TAG   the manifest (JSON)
//	MODELS/blobs/sha256-HEX                     each layer and the config
//
//	{"schemaVersion":2,
//	 "mediaType":"application/vnd.docker.distribution.manifest.v2+json",
//	 "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:…","size":N},
//	 "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:…","size":N}, …]}
//
// Add reads one manifest file, or every manifest of a models folder: each
// layer's and the config's sha256 is checked against its blob
// (integrity_error), and the model is added with the layers under model
// file names (model.gguf, which the GGUF codec takes per tensor; template,
// system, params, license, messages, adapter, projector; config.json) and
// the manifest's own bytes recorded (ollama.manifest, ollama.name), so that
// checkout writes back the same manifest and blobs. The ref is MODEL for
// registry.ollama.ai/library, NAMESPACE/MODEL for another namespace,
// HOST/NAMESPACE/MODEL otherwise, tagged TAG.
//
// Checkout of a version added some other way writes its one GGUF file as
// the model layer with a config, named after its ref (tag latest); the
// config has the details `ollama create` records of a GGUF (family,
// parameter size, file type), which `ollama list` and /api/show print.
// e2e/ollama_serve_test.go has the real ollama serve what is written.
package ollama
