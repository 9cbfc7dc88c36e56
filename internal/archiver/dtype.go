package archiver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mstore/mstore/internal/objects"
)

// torchDTypes maps config.json's torch_dtype to SafeTensors dtype names.
var torchDTypes = map[string]string{
	"float32": "F32", "float": "F32", "float16": "F16", "half": "F16",
	"bfloat16": "BF16", "float64": "F64", "double": "F64",
}

var floatDTypes = map[string]bool{"F32": true, "F16": true, "BF16": true, "F64": true}

// DTypeMismatch returns a warning when config.json's torch_dtype disagrees
// with the dtype of the model's floating-point tensors (the seeds'
// anti-pattern AP-5: a loader that trusts the config silently casts or
// produces NaNs), or "" when they agree or there is nothing to compare.
func DTypeMismatch(configJSON []byte, tensors []objects.Tensor) string {
	if len(configJSON) == 0 {
		return ""
	}
	var cfg struct {
		TorchDType any `json:"torch_dtype"`
		DType      any `json:"dtype"` // newer transformers write "dtype"
	}
	if json.Unmarshal(configJSON, &cfg) != nil {
		return ""
	}
	declared, _ := cfg.TorchDType.(string)
	if declared == "" {
		declared, _ = cfg.DType.(string)
	}
	want, ok := torchDTypes[strings.TrimPrefix(declared, "torch.")]
	if !ok {
		return ""
	}
	counts := map[string]int{}
	floats := 0
	for _, t := range tensors {
		if floatDTypes[t.DType] {
			counts[t.DType]++
			floats++
		}
	}
	if floats == 0 || counts[want] > 0 {
		return ""
	}
	var found []string
	for dt, n := range counts {
		found = append(found, fmt.Sprintf("%s×%d", dt, n))
	}
	sort.Strings(found)
	return fmt.Sprintf("config.json declares torch_dtype %q but no floating-point tensor is %s (found %s); a loader that trusts the config will cast or misread the weights",
		declared, want, strings.Join(found, ", "))
}
