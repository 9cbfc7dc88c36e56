package restorer

import (
	"bytes"
	"path"
	"regexp"

	"github.com/mstore/mstore/formats/gguf/hfconv"
	"github.com/mstore/mstore/objects"
)

// torchDTypeKey matches config.json's "torch_dtype" (and newer
// transformers' "dtype") with its string value.
var torchDTypeKey = regexp.MustCompile(`("(?:torch_)?dtype"\s*:\s*)"[^"]*"`)

// castConfig is config.json beside the container files with torch_dtype
// set to the --dtype of a SafeTensors checkout that cast tensors, so that
// the written directory declares what it holds (the seeds' AP-5); the rest
// of the file is kept byte for byte. nil when nothing changes.
func castConfig(req PlanRequest, cast bool) (map[string][]byte, error) {
	target, err := castDType(req.Options.DType)
	if err != nil || !cast || target == "" || req.Frames == nil {
		return nil, err
	}
	torch := hfconv.TorchDType(target)
	var dir string
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			dir = path.Dir(f.Path)
			break
		}
	}
	p := path.Join(dir, hfconv.ConfigFile)
	if f := req.Source.File(p); f == nil || f.Role != objects.RoleOther {
		return nil, nil
	}
	frames, err := req.Frames(p, maxHFFile)
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
