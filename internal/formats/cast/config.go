package cast

import (
	"bytes"
	"path"
	"regexp"
	"slices"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// torchDTypeKey matches config.json's "torch_dtype" (and newer
// transformers' "dtype") with its string value.
var torchDTypeKey = regexp.MustCompile(`("(?:torch_)?dtype"\s*:\s*)"[^"]*"`)

// torchDTypes are transformers' names of the dtypes --dtype casts to.
var torchDTypes = map[string]string{"F32": "float32", "F16": "float16", "BF16": "bfloat16"}

// maxConfig bounds the config.json read (real ones are a few KiB).
const maxConfig = 16 << 20

// Config sets, in planned.Extra, the config.json beside the version's
// container files with torch_dtype set to the --dtype of a checkout that
// cast (planned.Used holds --dtype), whatever the target, so that the
// written directory declares what it holds; the rest of the file is kept
// byte for byte. A config.json the planner wrote itself (a GGUF model
// converted to a Hugging Face directory) is left as it is.
func Config(req formats.PlanRequest, planned *formats.Planned) error {
	target, err := DType(req.Options.DType)
	torch := torchDTypes[target]
	if err != nil || torch == "" || req.Frames == nil || !slices.Contains(planned.Used, formats.OptDType) {
		return err
	}
	var dir string
	for _, f := range req.Source.Files {
		if f.Role == objects.RoleContainer {
			dir = path.Dir(f.Path)
			break
		}
	}
	p := path.Join(dir, "config.json")
	if f := req.Source.File(p); f == nil || f.Role != objects.RoleOther || planned.Extra[p] != nil {
		return nil
	}
	frames, err := req.Frames(p, maxConfig)
	if err != nil {
		return err
	}
	old := bytes.Join(frames, nil)
	b := torchDTypeKey.ReplaceAll(old, []byte(`${1}"`+torch+`"`))
	if bytes.Equal(b, old) {
		return nil
	}
	if planned.Extra == nil {
		planned.Extra = map[string][]byte{}
	}
	planned.Extra[p] = b
	return nil
}
