package safetensors

import (
	"bytes"
	"path"
	"regexp"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/cast"
	"github.com/mstore/mstore/internal/objects"
)

// torchDTypeKey matches config.json's "torch_dtype" (and newer
// transformers' "dtype") with its string value.
var torchDTypeKey = regexp.MustCompile(`("(?:torch_)?dtype"\s*:\s*)"[^"]*"`)

// torchDTypes are transformers' names of the dtypes --dtype casts to.
var torchDTypes = map[string]string{"F32": "float32", "F16": "float16", "BF16": "bfloat16"}

// maxConfig bounds the config.json read (real ones are a few KiB).
const maxConfig = 16 << 20

// castConfig is config.json beside the container files with torch_dtype
// set to the --dtype of a SafeTensors checkout that cast tensors, so that
// the written directory declares what it holds; the rest of the file is
// kept byte for byte. nil when nothing changes.
func castConfig(req formats.PlanRequest, casts bool) (map[string][]byte, error) {
	target, err := cast.DType(req.Options.DType)
	torch := torchDTypes[target]
	if err != nil || !casts || torch == "" || req.Frames == nil {
		return nil, err
	}
	var dir string
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			dir = path.Dir(f.Path)
			break
		}
	}
	p := path.Join(dir, "config.json")
	if f := req.Source.File(p); f == nil || f.Role != objects.RoleOther {
		return nil, nil
	}
	frames, err := req.Frames(p, maxConfig)
	if err != nil {
		return nil, err
	}
	old := bytes.Join(frames, nil)
	b := torchDTypeKey.ReplaceAll(old, []byte(`${1}"`+torch+`"`))
	if bytes.Equal(b, old) {
		return nil, nil
	}
	return map[string][]byte{p: b}, nil
}
