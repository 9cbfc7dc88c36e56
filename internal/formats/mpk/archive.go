package mpk

import (
	"fmt"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

const pkg = "mpk"

// The limits' defaults, used for every limit flag not given (or given a
// value below one).
const (
	DefaultMaxArchiveBytes int64 = 16 << 30 // the archive file, and the tar stream it decompresses to
	DefaultMaxEntries      int64 = 10_000   // tar entries, directories included
	DefaultMaxEntryBytes   int64 = 8 << 30  // one entry's payload
	DefaultMaxJSONDepth          = 64       // nested arrays and objects in any JSON member
)

// MaxJSONDepthCap bounds max_json_depth whatever the user asks: the JSON
// checker recurses once per level, and a goroutine's stack must not be the
// limit that stops a hostile file.
const MaxJSONDepthCap = 10_000

// MaxJSONBytes bounds a JSON member: JSON is validated in memory, so a
// bigger one is refused (size_limit_exceeded) whatever max_entry_bytes says.
const MaxJSONBytes int64 = 64 << 20

// The limit flags (LimitFlags), by name.
const (
	FlagMaxArchiveBytes = "max-archive-bytes"
	FlagMaxEntries      = "max-entries"
	FlagMaxEntryBytes   = "max-entry-bytes"
	FlagMaxJSONDepth    = "max-json-depth"
)

// LimitFlags are the bounds on an archive a user can set on add.
func (codec) LimitFlags() []formats.LimitFlag {
	return []formats.LimitFlag{
		{Name: FlagMaxArchiveBytes, Size: true, Usage: "MPK: refuse an archive larger than this, compressed or decompressed (default 16GiB)"},
		{Name: FlagMaxEntries, Usage: "MPK: refuse an archive of more entries than this (default 10000)"},
		{Name: FlagMaxEntryBytes, Size: true, Usage: "MPK: refuse an archive entry larger than this (default 8GiB)"},
		{Name: FlagMaxJSONDepth, Usage: "MPK: refuse JSON nested deeper than this (default 64)"},
	}
}

// Bounds are the limits an archive is read with.
type Bounds struct {
	MaxArchiveBytes int64
	MaxEntries      int64
	MaxEntryBytes   int64
	MaxJSONDepth    int
}

// LimitsOf is the formats.Limits that sets b's non-zero fields (tests,
// and callers of Load).
func LimitsOf(b Bounds) formats.Limits {
	l := formats.Limits{Codec: map[string]int64{}}
	for name, v := range map[string]int64{FlagMaxArchiveBytes: b.MaxArchiveBytes, FlagMaxEntries: b.MaxEntries,
		FlagMaxEntryBytes: b.MaxEntryBytes, FlagMaxJSONDepth: int64(b.MaxJSONDepth)} {
		if v != 0 {
			l.Codec[name] = v
		}
	}
	return l
}

// Limits returns the bounds l sets, the defaults for those it does not,
// and MaxJSONDepth at most MaxJSONDepthCap.
func Limits(fl formats.Limits) Bounds {
	l := Bounds{MaxArchiveBytes: fl.Codec[FlagMaxArchiveBytes], MaxEntries: fl.Codec[FlagMaxEntries],
		MaxEntryBytes: fl.Codec[FlagMaxEntryBytes], MaxJSONDepth: int(min(fl.Codec[FlagMaxJSONDepth], MaxJSONDepthCap))}
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.MaxJSONDepth <= 0 {
		l.MaxJSONDepth = DefaultMaxJSONDepth
	}
	l.MaxJSONDepth = min(l.MaxJSONDepth, MaxJSONDepthCap)
	return l
}

// Options say how Load reads an archive.
type Options struct {
	Limits formats.Limits
	// Name is the archive's file name. When set, it must end in a lowercase
	// ".tar.gz" (checked before anything is read); it names the archive in
	// errors.
	Name string
}

// Archive is what Load found in a valid archive.
type Archive struct {
	Size   int64          // of the compressed file
	Digest objects.Digest // BLAKE3 of the compressed file
	SHA256 string         // of the compressed file, hex (as vendors publish it)
	// TarSize is the size of the decompressed tar stream.
	TarSize int64
	// Members are the regular files, in stream order.
	Members []Member
	// Extents cut the tar stream into frames (headers, padding), member
	// contents (TensorData, Tensor indexing Members) and the zero end
	// marker with any zero blocks after it (Zeros), in order.
	Extents []formats.Extent
	// Contracts are the MPK inference contracts (mpk.json, *_mpk.json).
	Contracts []Contract
	// Stages are the first pipeline's stages of pipeline_sequence.json in
	// their stable order: ascending sequence_id, then position in the file.
	Stages []Stage
}

// Member is a regular file of an archive.
type Member struct {
	Name   string // its path in the archive, normalised (no leading "./")
	Target string // where it is extracted: etc/, lib/ or share/ + its base name
	Offset int64  // of its content in the tar stream
	Size   int64
}

// Contract is one MPK inference contract file.
type Contract struct {
	Member  string `json:"member"`
	Version string `json:"version"`
}

// Stage is one stage of pipeline_sequence.json.
type Stage struct {
	SequenceID int64  `json:"sequence_id"`
	Name       string `json:"name"`
	PluginID   string `json:"pluginId"`
	ConfigPath string `json:"configPath"`
	Processor  string `json:"processor"`
	Kernel     string `json:"kernel"`
	// Input lists the stage's dependencies ("decoder" or earlier stages);
	// a single string in the file is a list of one here.
	Input []string `json:"input,omitempty"`
}

// problem is a refusal found inside one JSON member; the loader adds the
// member's name.
type problem struct {
	class errs.Class
	off   int64 // byte offset in the member, or -1
	msg   string
}

func (p *problem) Error() string { return p.class.Key() + ": " + p.msg }

func refuse(class errs.Class, format string, args ...any) *problem {
	return &problem{class: class, off: -1, msg: fmt.Sprintf(format, args...)}
}
