package pytorch

import "testing"

// Checkpoints and shard indexes are claimed; the Trainer's own pickles
// (arguments, optimizer, scheduler, random states) and other formats'
// files are not, so they stay a model's other files.
func TestClaims(t *testing.T) {
	for p, want := range map[string]bool{
		"pytorch_model.bin": true, "model.pt": true, "sub/weights.PTH": true, "adapter_model.bin": true,
		"pytorch_model-00001-of-00002.bin": true, "pytorch_model.bin.index.json": true,
		"training_args.bin": false, "optimizer.pt": false, "scheduler.pt": false, "scaler.pt": false,
		"rng_state.pth": false, "rng_state_3.pth": false, "model.safetensors": false, "model.gguf": false,
		"model.onnx": false, "config.json": false, "silero_vad.jit": false, "model.bin.txt": false,
	} {
		if got := Codec.Claims(p); got != want {
			t.Errorf("Claims(%q) = %v, want %v", p, got, want)
		}
	}
}
