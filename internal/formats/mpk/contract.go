package mpk

import (
	"encoding/json"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mstore/mstore/internal/errs"
)

// The MPK inference contract versions and the pipeline kernels this build
// supports: one list each, documented in the README.
var (
	supportedVersions = []string{"1.0"}
	supportedKernels  = []string{"mla", "cvu", "apu"}
)

// SupportedVersions returns the contract versions this build accepts.
func SupportedVersions() []string { return slices.Clone(supportedVersions) }

// SupportedKernels returns the pipeline kernels this build accepts.
func SupportedKernels() []string { return slices.Clone(supportedKernels) }

// pipelineName is the loader-side stage configuration every archive holds.
const pipelineName = "pipeline_sequence.json"

// isContract reports whether a member is an MPK inference contract:
// mpk.json or *_mpk.json.
func isContract(name string) bool {
	base := path.Base(name)
	return base == "mpk.json" || strings.HasSuffix(base, "_mpk.json")
}

func isPipeline(name string) bool { return path.Base(name) == pipelineName }

// checkContract checks a contract: a JSON object whose "version" is a
// string (schema_error) that this build supports (unsupported_version).
func checkContract(v any) (string, *problem) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", refuse(errs.SchemaError, "the MPK contract is not a JSON object")
	}
	raw, ok := obj["version"]
	if !ok {
		return "", refuse(errs.SchemaError, `the MPK contract has no "version"`)
	}
	version, ok := raw.(string)
	if !ok {
		return "", refuse(errs.SchemaError, `the MPK contract's "version" is not a string`)
	}
	if !slices.Contains(supportedVersions, version) {
		return "", refuse(errs.UnsupportedVersion, "MPK contract version %s is not supported (this build supports %s)",
			quote(version), strings.Join(supportedVersions, ", "))
	}
	return version, nil
}

// stageFields are the non-empty strings every stage must have.
var stageFields = []string{"name", "pluginId", "configPath", "processor", "kernel"}

// checkPipeline checks pipeline_sequence.json (every failure schema_error)
// and returns the first pipeline's stages in their stable order: ascending
// sequence_id, then position in the file.
func checkPipeline(v any) ([]Stage, *problem) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(errs.SchemaError, "not a JSON object")
	}
	pipelines, ok := obj["pipelines"].([]any)
	if !ok || len(pipelines) == 0 {
		return nil, refuse(errs.SchemaError, `"pipelines" is not a non-empty array`)
	}
	first, ok := pipelines[0].(map[string]any)
	if !ok {
		return nil, refuse(errs.SchemaError, "the first pipeline is not an object")
	}
	seq, ok := first["sequence"].([]any)
	if !ok || len(seq) == 0 {
		return nil, refuse(errs.SchemaError, `the first pipeline's "sequence" is not a non-empty array`)
	}
	stages := make([]Stage, len(seq))
	names := map[string]int{}
	for i, raw := range seq {
		s, p := readStage(raw, i)
		if p != nil {
			return nil, p
		}
		if j, dup := names[s.Name]; dup {
			return nil, refuse(errs.SchemaError, "stages %d and %d are both named %s", j, i, quote(s.Name))
		}
		names[s.Name] = i
		stages[i] = s
	}
	sort.SliceStable(stages, func(i, j int) bool { return stages[i].SequenceID < stages[j].SequenceID })
	earlier := map[string]bool{}
	for _, s := range stages {
		for _, dep := range s.Input {
			if dep != "decoder" && !earlier[dep] {
				return nil, refuse(errs.SchemaError, "stage %s takes input %s, which is neither \"decoder\" nor a stage before it (stages run by sequence_id, then position)",
					quote(s.Name), quote(dep))
			}
		}
		earlier[s.Name] = true
	}
	return stages, nil
}

// readStage checks the i-th stage entry's fields.
func readStage(raw any, i int) (Stage, *problem) {
	obj, ok := raw.(map[string]any)
	if !ok {
		return Stage{}, refuse(errs.SchemaError, "stage %d is not an object", i)
	}
	var s Stage
	num, ok := obj["sequence_id"].(json.Number)
	if !ok {
		return s, refuse(errs.SchemaError, `stage %d: "sequence_id" is missing or not a number`, i)
	}
	id, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil {
		return s, refuse(errs.SchemaError, `stage %d: "sequence_id" %s is not an integer (of 64 bits)`, i, num)
	}
	s.SequenceID = id
	fields := make([]string, len(stageFields))
	for k, f := range stageFields {
		str, ok := obj[f].(string)
		if !ok || str == "" {
			return s, refuse(errs.SchemaError, "stage %d: %s is missing or not a non-empty string", i, quote(f))
		}
		fields[k] = str
	}
	s.Name, s.PluginID, s.ConfigPath, s.Processor, s.Kernel = fields[0], fields[1], fields[2], fields[3], fields[4]
	if !slices.Contains(supportedKernels, s.Kernel) {
		return s, refuse(errs.SchemaError, "stage %s: kernel %s is not supported (this build supports %s)",
			quote(s.Name), quote(s.Kernel), strings.Join(supportedKernels, ", "))
	}
	if in, present := obj["input"]; present {
		switch in := in.(type) {
		case string:
			s.Input = []string{in}
		case []any:
			s.Input = []string{}
			for _, dep := range in {
				str, ok := dep.(string)
				if !ok {
					return s, refuse(errs.SchemaError, `stage %s: "input" holds something other than a string`, quote(s.Name))
				}
				s.Input = append(s.Input, str)
			}
		default:
			return s, refuse(errs.SchemaError, `stage %s: "input" is neither a string nor an array of strings`, quote(s.Name))
		}
	}
	return s, nil
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
