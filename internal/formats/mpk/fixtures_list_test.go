package mpk_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mstore/mstore/internal/formats/mpk/mpktest"
)

// This file lists every fixture archive: its name, the rule it tests, the
// outcome the loader must give and the limits it is loaded with. The
// generator (fixtures_test.go) writes them; the bytes depend on nothing but
// this code.

// fixtureLimits are the limits a fixture is loaded with (zero: default);
// the JSON keys are the loader options' names, and the e2e test passes them
// as add's flags (--max-entries, …).
type fixtureLimits struct {
	MaxArchiveBytes int64 `json:"max_archive_bytes,omitempty"`
	MaxEntries      int64 `json:"max_entries,omitempty"`
	MaxEntryBytes   int64 `json:"max_entry_bytes,omitempty"`
	MaxJSONDepth    int   `json:"max_json_depth,omitempty"`
}

type fixture struct {
	name    string
	rule    string
	outcome string // "ok" or the class key
	limits  *fixtureLimits
	bytes   []byte
}

// kv is one member of a JSON object: a key and its raw JSON value.
type kv struct{ k, v string }

func obj(pairs []kv) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = fmt.Sprintf("%q: %s", p.k, p.v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// set returns pairs with key k's value replaced by v, added if missing,
// or removed when v is "".
func set(pairs []kv, k, v string) []kv {
	var out []kv
	found := false
	for _, p := range pairs {
		if p.k == k {
			found = true
			if v == "" {
				continue
			}
			p.v = v
		}
		out = append(out, p)
	}
	if !found && v != "" {
		out = append(out, kv{k, v})
	}
	return out
}

func stage(id int, name, kernel, input string) []kv {
	pairs := []kv{
		{"sequence_id", fmt.Sprint(id)},
		{"name", fmt.Sprintf("%q", name)},
		{"pluginId", fmt.Sprintf("%q", "simaai_"+name)},
		{"configPath", fmt.Sprintf("%q", "etc/"+name+".json")},
		{"processor", fmt.Sprintf("%q", strings.ToUpper(kernel))},
		{"kernel", fmt.Sprintf("%q", kernel)},
	}
	if input != "" {
		pairs = append(pairs, kv{"input", input})
	}
	return pairs
}

// defaultStages are the valid pipeline's stages.
func defaultStages() [][]kv {
	return [][]kv{
		stage(1, "preproc", "cvu", `"decoder"`),
		stage(2, "infer", "mla", `["preproc"]`),
		stage(3, "postproc", "apu", `["infer", "decoder"]`),
	}
}

func pipeline(stages ...[]kv) string {
	parts := make([]string, len(stages))
	for i, s := range stages {
		parts[i] = obj(s)
	}
	return `{"pipelines": [{"name": "resnet50", "sequence": [` + strings.Join(parts, ", ") + `]}]}`
}

// withStage is the default pipeline with stage i changed by f.
func withStage(i int, f func([]kv) []kv) string {
	stages := defaultStages()
	stages[i] = f(stages[i])
	return pipeline(stages...)
}

const contractJSON = `{"version": "1.0", "model": "resnet50", "inputs": [{"name": "image", "shape": [1, 3, 224, 224]}]}`

// binary returns n deterministic bytes that begin like an ELF file: runs
// of 16 pseudo-random byte values, so that the fixtures compress well.
func binary(seed uint32, n int) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		if i%16 == 0 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
		}
		b[i] = byte(x)
	}
	copy(b, "\x7fELF")
	return b
}

// validEntries is the valid archive: a top directory, a model folder,
// the contract, the pipeline, a stage config, an ELF and a shared object.
func validEntries() []mpktest.Entry {
	return []mpktest.Entry{
		mpktest.Dir("./"),
		mpktest.Dir("./model/"),
		mpktest.File("./model/resnet50_mpk.json", []byte(contractJSON)),
		mpktest.File("./model/pipeline_sequence.json", []byte(pipeline(defaultStages()...))),
		mpktest.File("./model/preproc.json", []byte(`{"resize": [224, 224], "normalize": {"mean": [0.485, 0.456, 0.406]}}`)),
		mpktest.File("./model/resnet50.elf", binary(1, 1500)),
		mpktest.File("./model/libpostproc.so", binary(2, 700)),
	}
}

// replaced is the valid archive with the member named name given data.
func replaced(name string, data []byte) []mpktest.Entry {
	out := validEntries()
	for i := range out {
		if out[i].Name == name {
			out[i].Data = data
		}
	}
	return out
}

// without is the valid archive without the members named names.
func without(names ...string) []mpktest.Entry {
	var out []mpktest.Entry
	for _, e := range validEntries() {
		if !slices.Contains(names, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

func plus(extra ...mpktest.Entry) []mpktest.Entry { return append(validEntries(), extra...) }

func archive(entries []mpktest.Entry) []byte {
	return mpktest.Gzip(mpktest.Tar(entries, mpktest.TarOptions{}))
}

func withPipeline(p string) []byte {
	return archive(replaced("./model/pipeline_sequence.json", []byte(p)))
}

func withContract(c string) []byte { return archive(replaced("./model/resnet50_mpk.json", []byte(c))) }

// sparseEntry is a PAX 1.0 sparse file: its data begins with the sparse
// map (one region: offset 0, 10 bytes) padded to a block.
func sparseEntry() mpktest.Entry {
	data := make([]byte, mpktest.Block, mpktest.Block+10)
	copy(data, "1\n0\n10\n")
	data = append(data, binary(9, 10)...)
	return mpktest.Entry{Name: "model/GNUSparseFile.0/sparse.so", Data: data, PAX: map[string]string{
		"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "model/sparse.so", "GNU.sparse.realsize": "10"}}
}

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// fixtures returns every fixture, in the manifest's order.
func fixtures() []fixture {
	valid := archive(validEntries())
	validTar := mpktest.Tar(validEntries(), mpktest.TarOptions{})
	ok := func(name, rule string, b []byte) fixture {
		return fixture{name: name, rule: rule, outcome: "ok", bytes: b}
	}
	bad := func(name, outcome, rule string, b []byte) fixture {
		return fixture{name: name, rule: rule, outcome: outcome, bytes: b}
	}
	limited := func(f fixture, l fixtureLimits) fixture { f.limits = &l; return f }
	evil := mpktest.File("evil.so", binary(9, 64))
	named := func(name string) mpktest.Entry { e := evil; e.Name = name; return e }
	const (
		ia = "invalid_archive"
		pt = "path_traversal"
		se = "schema_error"
		uv = "unsupported_version"
		sl = "size_limit_exceeded"
	)

	fs := []fixture{
		ok("valid.tar.gz", "a valid archive: contract, pipeline, config, ELF and shared object under ./model/", valid),
		ok("valid_minimal.tar.gz", "the least an archive may hold: mpk.json, pipeline_sequence.json and one .so, no directories",
			archive([]mpktest.Entry{
				mpktest.File("mpk.json", []byte(`{"version":"1.0"}`)),
				mpktest.File("pipeline_sequence.json", []byte(pipeline(stage(7, "only", "mla", "")))),
				mpktest.File("model.so", binary(3, 512)),
			})),
		ok("valid_stable_order.tar.gz", "stages listed out of sequence_id order, equal ids kept in file order; inputs refer to stages earlier in that order",
			withPipeline(pipeline(
				stage(20, "post", "apu", `["mid_b", "mid_a"]`),
				stage(10, "mid_a", "mla", `"pre"`),
				stage(10, "mid_b", "mla", `["pre", "mid_a"]`),
				stage(0, "pre", "cvu", `[]`),
			))),
		ok("valid_pax_long_name.tar.gz", "a member whose long name is given by a PAX header",
			archive(plus(mpktest.Entry{Name: "long.so", Data: binary(4, 100),
				PAX: map[string]string{"path": "model/" + strings.Repeat("very_long_directory_name/", 5) + "libextra.so"}}))),
		ok("valid_trailing_zero_blocks.tar.gz", "zero blocks after the end marker (tar's record padding)",
			mpktest.Gzip(mpktest.Tar(validEntries(), mpktest.TarOptions{Trailing: make([]byte, 8*mpktest.Block)}))),

		bad("wrong_ext.mpk", ia, "the .mpk extension is refused before the stream is read", valid),
		bad("wrong_ext.tgz", ia, "the .tgz extension is refused", valid),
		bad("wrong_ext.tar", ia, "the .tar extension is refused", validTar),
		bad("wrong_ext.gz", ia, "a bare .gz is refused", valid),
		bad("wrong_ext.TAR.GZ", ia, "an upper-case .TAR.GZ is refused", valid),
		bad("wrong_ext_mixed.Tar.Gz", ia, "a mixed-case .Tar.Gz is refused", valid),

		limited(bad("limit_archive_bytes.tar.gz", sl, "an archive over max_archive_bytes", valid), fixtureLimits{MaxArchiveBytes: 4096}),
		limited(bad("limit_entries.tar.gz", sl, "more entries than max_entries", valid), fixtureLimits{MaxEntries: 4}),
		limited(bad("limit_entry_bytes.tar.gz", sl, "an entry over max_entry_bytes", valid), fixtureLimits{MaxEntryBytes: 1024}),
		bad("limit_entry_bytes_declared.tar.gz", sl, "a header declaring 1 TiB, over the default max_entry_bytes, refused before any content is read",
			archive(plus(mpktest.Entry{Name: "huge.elf", Size: 1 << 40}))),
		limited(bad("limit_json_depth.tar.gz", sl, "JSON nested deeper than max_json_depth (3: the contract is 4 deep, the pipeline 6)", valid), fixtureLimits{MaxJSONDepth: 3}),
		bad("json_too_deep.tar.gz", sl, "a JSON member nested 65 deep, over the default max_json_depth of 64",
			archive(replaced("./model/preproc.json", []byte(`{"a": `+nested(64)+`}`)))),

		bad("path_absolute.tar.gz", pt, "an absolute path", archive(plus(named("/tmp/mstore-mpk-fixture-absolute.so")))),
		bad("path_dotdot.tar.gz", pt, "a leading .. segment", archive(plus(named("../mstore-mpk-fixture-evil.so")))),
		bad("path_dotdot_inside.tar.gz", pt, "a .. segment inside the path", archive(plus(named("model/../../mstore-mpk-fixture-evil.so")))),
		bad("path_drive.tar.gz", pt, "a Windows drive prefix", archive(plus(named("C:/Windows/evil.so")))),
		bad("path_drive_relative.tar.gz", pt, "a drive-relative Windows path", archive(plus(named("C:evil.so")))),
		bad("path_dotdot_backslash.tar.gz", pt, `mixed-separator traversal ..\`, archive(plus(named(`..\evil.so`)))),
		bad("path_dotdot_double_backslash.tar.gz", pt, `mixed-separator traversal ..\\`, archive(plus(named(`..\\evil.so`)))),
		bad("path_dotdot_double_slash.tar.gz", pt, "mixed-separator traversal ..//", archive(plus(named("..//evil.so")))),
		bad("path_invalid_utf8.tar.gz", pt, "path bytes that are not UTF-8", archive(plus(named("model/evil\xff\xfe.so")))),
		bad("path_fullwidth_solidus.tar.gz", pt, "U+FF0F FULLWIDTH SOLIDUS", archive(plus(named("..\uff0fevil.so")))),
		bad("path_division_slash.tar.gz", pt, "U+2215 DIVISION SLASH", archive(plus(named("..\u2215evil.so")))),
		bad("path_fullwidth_reverse_solidus.tar.gz", pt, "U+FF3C FULLWIDTH REVERSE SOLIDUS", archive(plus(named("..\uff3cevil.so")))),
		bad("path_fullwidth_full_stop.tar.gz", pt, "U+FF0E FULLWIDTH FULL STOP as a dot segment", archive(plus(named("\uff0e\uff0e/evil.so")))),
		bad("path_one_dot_leader.tar.gz", pt, "U+2024 ONE DOT LEADER as a dot segment", archive(plus(named("\u2024\u2024/evil.so")))),
		bad("path_small_full_stop.tar.gz", pt, "U+FE52 SMALL FULL STOP as a dot segment", archive(plus(named("\ufe52\ufe52/evil.so")))),
		bad("path_pax_dotdot.tar.gz", pt, "a harmless header name overridden by a PAX path with ..",
			archive(plus(mpktest.Entry{Name: "harmless.so", Data: binary(5, 10), PAX: map[string]string{"path": "../mstore-mpk-fixture-pax.so"}}))),
		bad("path_directory_dotdot.tar.gz", pt, "a directory entry that leaves the root", archive(plus(mpktest.Dir("../mstore-mpk-fixture-dir/")))),

		bad("type_symlink.tar.gz", pt, "a symbolic link", archive(plus(mpktest.Entry{Name: "model/link.so", Type: '2', Linkname: "/etc/passwd"}))),
		bad("type_hardlink.tar.gz", pt, "a hard link", archive(plus(mpktest.Entry{Name: "model/hard.so", Type: '1', Linkname: "model/libpostproc.so"}))),
		bad("type_char_device.tar.gz", ia, "a character device", archive(plus(mpktest.Entry{Name: "model/tty.so", Type: '3'}))),
		bad("type_block_device.tar.gz", ia, "a block device", archive(plus(mpktest.Entry{Name: "model/sda.so", Type: '4'}))),
		bad("type_fifo.tar.gz", ia, "a FIFO", archive(plus(mpktest.Entry{Name: "model/pipe.so", Type: '6'}))),
		bad("type_global_pax.tar.gz", ia, "a global PAX header, which other tar readers apply to later entries",
			archive(append([]mpktest.Entry{{Name: "pax_global_header", Type: 'g', Data: mpktest.PAXRecords(map[string]string{"path": "../evil/x.so"})}}, validEntries()...))),
		bad("type_directory_with_data.tar.gz", ia, "a directory entry that declares content", archive(plus(mpktest.Entry{Name: "model/dir/", Type: '5', Data: []byte("hidden")}))),

		bad("duplicate_name.tar.gz", ia, "the same member twice", archive(plus(mpktest.File("./model/libpostproc.so", binary(6, 10))))),
		bad("duplicate_dot_slash.tar.gz", ia, "x and ./x: the same path once normalised", archive(plus(mpktest.File("model/libpostproc.so", binary(6, 10))))),
		bad("duplicate_target.tar.gz", ia, "two members extracted to the same lib/NAME", archive(plus(mpktest.File("other/libpostproc.so", binary(6, 10))))),
		bad("duplicate_case.tar.gz", ia, "two members whose targets differ only in case", archive(plus(mpktest.File("other/LIBPOSTPROC.so", binary(6, 10))))),
		bad("duplicate_unicode_normalisation.tar.gz", ia, "two members whose targets differ only in Unicode normalisation (NFC and NFD é)",
			archive(plus(mpktest.File("a/caf\u00e9.so", binary(6, 10)), mpktest.File("b/cafe\u0301.so", binary(7, 10))))),

		bad("corrupt_header_checksum.tar.gz", ia, "a tar header whose checksum is wrong",
			archive(plus(mpktest.Entry{Name: "model/extra.so", Data: binary(8, 10), BadChecksum: true}))),
		bad("truncated_gzip.tar.gz", ia, "a gzip stream cut short", valid[:len(valid)/2]),
		bad("truncated_tar.tar.gz", ia, "a complete gzip stream around a tar stream cut in a member's content",
			mpktest.Gzip(validTar[:len(validTar)-2*mpktest.Block-500])),
		bad("missing_end_marker.tar.gz", ia, "a tar stream that stops after its last entry, without the end-of-archive marker",
			mpktest.Gzip(mpktest.Tar(validEntries(), mpktest.TarOptions{NoEndMarker: true}))),
		bad("corrupt_gzip_checksum.tar.gz", ia, "a gzip stream whose CRC-32 does not match", append(mpktest.GzipBlocks(validTar), make([]byte, 8)...)),
		bad("corrupt_gzip_header.tar.gz", ia, "a gzip stream with a bad header", append([]byte{0x1f, 0x8b, 9}, valid[3:]...)),
		bad("corrupt_deflate.tar.gz", ia, "a deflate block of the reserved type 11", append(append(append([]byte{}, valid[:10]...), 0x07), valid[11:]...)),
		bad("not_gzip.tar.gz", ia, "a plain tar stream named .tar.gz", validTar),
		bad("empty.tar.gz", ia, "an empty file", []byte{}),
		bad("trailing_data.tar.gz", ia, "bytes after the end-of-archive marker that other tar readers might read on",
			mpktest.Gzip(mpktest.Tar(validEntries(), mpktest.TarOptions{Trailing: mpktest.Tar([]mpktest.Entry{named("hidden.so")}, mpktest.TarOptions{})}))),
		bad("sparse_file.tar.gz", ia, "a GNU sparse file (PAX format 1.0, its map before the data)", archive(plus(sparseEntry()))),

		bad("unmapped_class.tar.gz", se, "a regular file of no class (.txt)", archive(plus(mpktest.File("model/README.txt", []byte("hello\n"))))),
		bad("unmapped_versioned_so.tar.gz", se, "a versioned shared object (.so.1) is of no class", archive(plus(mpktest.File("model/libx.so.1", binary(9, 10))))),
		bad("missing_contract.tar.gz", se, "no mpk.json or *_mpk.json", archive(without("./model/resnet50_mpk.json"))),
		bad("missing_pipeline.tar.gz", se, "no pipeline_sequence.json", archive(without("./model/pipeline_sequence.json"))),
		bad("missing_binary.tar.gz", se, "no .elf or .so", archive(without("./model/libpostproc.so", "./model/resnet50.elf"))),

		bad("json_duplicate_key.tar.gz", se, "a duplicate key at the top of a JSON member",
			archive(replaced("./model/preproc.json", []byte(`{"resize": [224, 224], "resize": [1, 1]}`)))),
		bad("json_duplicate_key_nested.tar.gz", se, "a duplicate key deep in a JSON member, written with an escape",
			archive(replaced("./model/preproc.json", []byte(`{"a": [{"b": {"mean": 1, "m\u0065an": 2}}]}`)))),
		bad("json_duplicate_key_pipeline.tar.gz", se, "a duplicate key in a pipeline stage",
			withPipeline(withStage(1, func(s []kv) []kv { return append(s, kv{"kernel", `"mla"`}) }))),
		bad("json_syntax.tar.gz", se, "a JSON member that does not parse", archive(replaced("./model/preproc.json", []byte(`{"resize": [224, 224,]}`)))),
		bad("json_two_values.tar.gz", se, "a JSON member holding two values", archive(replaced("./model/preproc.json", []byte(`{} {}`)))),
		bad("json_not_utf8.tar.gz", se, "a JSON member that is not UTF-8", archive(replaced("./model/preproc.json", []byte("{\"name\": \"caf\xe9\"}")))),

		bad("contract_version_unsupported.tar.gz", uv, "a contract version this build does not support", withContract(`{"version": "2.0"}`)),
		bad("contract_version_missing.tar.gz", se, "a contract without version", withContract(`{"model": "resnet50"}`)),
		bad("contract_version_not_string.tar.gz", se, "a contract whose version is a number", withContract(`{"version": 1.0}`)),
		bad("contract_not_object.tar.gz", se, "a contract that is not an object", withContract(`["1.0"]`)),

		bad("pipeline_not_object.tar.gz", se, "pipeline_sequence.json is not an object", withPipeline(`[]`)),
		bad("pipeline_no_pipelines.tar.gz", se, "no pipelines array", withPipeline(`{"sequence": []}`)),
		bad("pipeline_pipelines_not_array.tar.gz", se, "pipelines is not an array", withPipeline(`{"pipelines": {}}`)),
		bad("pipeline_empty_pipelines.tar.gz", se, "an empty pipelines array", withPipeline(`{"pipelines": []}`)),
		bad("pipeline_first_not_object.tar.gz", se, "the first pipeline is not an object", withPipeline(`{"pipelines": [[]]}`)),
		bad("pipeline_no_sequence.tar.gz", se, "the first pipeline has no sequence", withPipeline(`{"pipelines": [{"name": "x"}]}`)),
		bad("pipeline_empty_sequence.tar.gz", se, "the first pipeline's sequence is empty", withPipeline(`{"pipelines": [{"sequence": []}]}`)),
		bad("stage_not_object.tar.gz", se, "a stage that is not an object", withPipeline(`{"pipelines": [{"sequence": ["preproc"]}]}`)),
		bad("stage_sequence_id_missing.tar.gz", se, "a stage without sequence_id", withPipeline(withStage(0, func(s []kv) []kv { return set(s, "sequence_id", "") }))),
		bad("stage_sequence_id_fraction.tar.gz", se, "a sequence_id that is not an integer", withPipeline(withStage(0, func(s []kv) []kv { return set(s, "sequence_id", "1.5") }))),
		bad("stage_sequence_id_string.tar.gz", se, "a sequence_id given as a string", withPipeline(withStage(0, func(s []kv) []kv { return set(s, "sequence_id", `"1"`) }))),
	}
	for _, field := range []string{"name", "pluginId", "configPath", "processor", "kernel"} {
		fs = append(fs,
			bad("stage_"+field+"_missing.tar.gz", se, "a stage without "+field, withPipeline(withStage(1, func(s []kv) []kv { return set(s, field, "") }))),
			bad("stage_"+field+"_empty.tar.gz", se, "a stage whose "+field+" is empty", withPipeline(withStage(1, func(s []kv) []kv { return set(s, field, `""`) }))),
			bad("stage_"+field+"_not_string.tar.gz", se, "a stage whose "+field+" is not a string", withPipeline(withStage(1, func(s []kv) []kv { return set(s, field, `7`) }))),
		)
	}
	fs = append(fs,
		bad("stage_duplicate_name.tar.gz", se, "two stages of the same name", withPipeline(withStage(2, func(s []kv) []kv { return set(s, "name", `"preproc"`) }))),
		bad("stage_kernel_unsupported.tar.gz", se, "a kernel outside mla, cvu, apu", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "kernel", `"gpu"`) }))),
		bad("stage_kernel_case.tar.gz", se, "kernels are matched exactly (MLA is not mla)", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "kernel", `"MLA"`) }))),
		bad("stage_input_unknown.tar.gz", se, "an input naming no stage", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `["camera"]`) }))),
		bad("stage_input_later.tar.gz", se, "an input naming a later stage", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `"postproc"`) }))),
		bad("stage_input_self.tar.gz", se, "an input naming the stage itself", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `["infer"]`) }))),
		bad("stage_input_later_by_sequence_id.tar.gz", se, "an input naming a stage earlier in the file but later by sequence_id",
			withPipeline(pipeline(stage(5, "late", "cvu", `"decoder"`), stage(1, "early", "mla", `"late"`)))),
		bad("stage_input_not_string.tar.gz", se, "an input that is neither a string nor an array", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `{"from": "preproc"}`) }))),
		bad("stage_input_array_not_strings.tar.gz", se, "an input array holding a number", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `["preproc", 3]`) }))),
		bad("stage_input_null.tar.gz", se, "an input that is null", withPipeline(withStage(1, func(s []kv) []kv { return set(s, "input", `null`) }))),
	)
	return fs
}
