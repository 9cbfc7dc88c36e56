// Package journal owns the store's journal: an append-only file beside
// index.db that records every change the index cannot rebuild from the blob
// files alone (ref moves, tags, trims, ref removals, named remotes, which
// blobs are manifests, where packed blobs lie and how they are coded (the
// raw blobs of a pack many to a line, packrun.go), delta base hints), so
// that `mstore fsck --rebuild-index` can rebuild a lost or damaged index.
//
// One record per line, each line its own checksum:
//
//	CRC32C(json) as 8 hex digits, a space, the record as JSON, "\n"
//
// JSON escapes every newline, so a line is one record. Records are written in
// batches, one per index transaction: every record of a batch carries its
// number b; the batch starts with a "begin" record and ends with an "end"
// record. A batch is appended and
// fsynced before its transaction commits, so the journal never lacks what
// the index holds. A crash while appending leaves a torn tail: a line that
// fails its checksum, or a batch without its end; Read ignores both (their
// transaction never committed). A crash after the append and before the
// commit leaves a complete batch the index lacks; the next transaction
// reuses its number (the index holds the last committed one), and Read keeps
// only the last batch of each number. A line that fails its checksum inside
// a batch that then ends (bit rot, not a torn write) makes Read drop that
// batch and count it as Damaged: what it recorded is lost, and the rebuild
// says so.
//
// Changes are collected in memory during a transaction (Add), and the store
// drains them (Drain) just before it commits: refs and store record what
// they change without knowing about the file.
package journal

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
)

// Op is what a record says happened. Its zero value is invalid.
type Op string

// The operations a journal records.
const (
	OpMove      Op = "move"     // ref Name moved to Digest at Time with Msg
	OpTag       Op = "tag"      // tag Name:Tag created at Digest
	OpUntag     Op = "untag"    // tag Name:Tag removed (retired at Digest)
	OpRemoveRef Op = "rmref"    // ref Name and its history removed
	OpTrim      Op = "trim"     // history of Name trimmed to its newest Keep entries
	OpManifest  Op = "manifest" // blob Digest (Size bytes) is a manifest
	OpPacked    Op = "packed"   // blob Digest (Size bytes) is at Offset of pack Pack, coded as Enc
	OpPackRun   Op = "packrun"  // raw blobs Members are in pack Pack (packrun.go); Read gives them as OpPacked
	OpBase      Op = "base"     // version Digest's tensors are coded against version Base's (add --base)
	OpRemote    Op = "remote"   // named remote Name set to URL Msg (remote add)
	OpRemoteRm  Op = "rmremote" // named remote Name forgotten (remote rm)
	OpBegin     Op = "begin"    // a batch starts
	OpEnd       Op = "end"      // the batch is complete
)

// Record is one line of the journal.
type Record struct {
	Op     Op             `json:"op"`
	Batch  uint64         `json:"b"`
	Name   string         `json:"name,omitempty"`
	Tag    string         `json:"tag,omitempty"`
	Digest objects.Digest `json:"digest,omitzero"`
	Time   string         `json:"time,omitempty"` // RFC 3339 with nanoseconds, UTC
	Msg    string         `json:"msg,omitempty"`
	Keep   int            `json:"keep,omitempty"`
	Pack   string         `json:"pack,omitempty"` // hex pack id
	Offset int64          `json:"off,omitempty"`
	Size   int64          `json:"size,omitempty"`
	// A coded packed blob: Size is its stored size, Raw its raw size, Enc
	// its coding ("grouped", "delta") and Base a delta's base blob.
	Enc  string         `json:"enc,omitempty"`
	Raw  int64          `json:"raw,omitempty"`
	Base objects.Digest `json:"base,omitzero"`
	// Members are an OpPackRun record's blobs (packrun.go).
	Members string `json:"members,omitempty"`
}

// pending holds the records of each writable transaction in flight, in
// memory: a transaction that records 100,000 packed blobs costs a slice,
// not 100,000 bucket puts and JSON round trips. The store drains them just
// before the commit (Drain) and discards them when the transaction fails
// (Discard); a key keeps its *bolt.Tx alive, so a leaked entry can never be
// taken for a later transaction's.
var pending = struct {
	sync.Mutex
	m map[*bolt.Tx][]Record
}{m: map[*bolt.Tx][]Record{}}

// Add notes r in tx, a writable transaction, for the store to journal when
// tx commits.
func Add(tx *bolt.Tx, r Record) error { return AddAll(tx, []Record{r}) }

// AddAll is Add for many records.
func AddAll(tx *bolt.Tx, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if !tx.Writable() {
		return fmt.Errorf("journal: a record noted in a read-only transaction")
	}
	pending.Lock()
	pending.m[tx] = append(pending.m[tx], recs...)
	pending.Unlock()
	return nil
}

// Drain returns the records Add noted in tx, in order, and forgets them.
func Drain(tx *bolt.Tx) ([]Record, error) {
	pending.Lock()
	defer pending.Unlock()
	out := pending.m[tx]
	delete(pending.m, tx)
	return out, nil
}

// Discard forgets what Add noted in tx (a transaction that rolls back).
func Discard(tx *bolt.Tx) {
	pending.Lock()
	delete(pending.m, tx)
	pending.Unlock()
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeLine is one record as a journal line.
func encodeLine(r Record) ([]byte, error) {
	return appendLine(nil, r)
}

// appendLine appends r's journal line to dst.
func appendLine(dst []byte, r Record) ([]byte, error) {
	start := len(dst)
	dst = append(dst, "00000000 "...)
	dst, err := appendRecord(dst, r)
	if err != nil {
		return nil, err
	}
	var sum [4]byte
	v := dst[start+9:]
	c := crc32.Checksum(v, castagnoli)
	sum[0], sum[1], sum[2], sum[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	hex.Encode(dst[start:start+8], sum[:])
	return append(dst, '\n'), nil
}

// decodeLine parses one line without its newline; ok is false for a line
// that fails its checksum or does not decode.
func decodeLine(line []byte) (Record, bool) {
	var r Record
	if len(line) < 10 || line[8] != ' ' {
		return r, false
	}
	sum, err := hex.DecodeString(string(line[:8]))
	if err != nil {
		return r, false
	}
	v := line[9:]
	got := crc32.Checksum(v, castagnoli)
	if uint32(sum[0])<<24|uint32(sum[1])<<16|uint32(sum[2])<<8|uint32(sum[3]) != got {
		return r, false
	}
	if json.Unmarshal(v, &r) != nil || r.Op == "" {
		return r, false
	}
	return r, true
}

// Append writes recs as batch number batch, followed by its end record, at
// the end of the journal at path, and fsyncs it. A torn last line left by a
// crash is first ended with a newline, so that it stays one bad line and
// never swallows the batch written after it.
func Append(path string, batch uint64, recs []Record) error {
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	// Lines go out through a buffer of their own: a batch of 100,000
	// packed blobs is never all in memory as text.
	w := bufio.NewWriterSize(f, 1<<20)
	if info, err := f.Stat(); err == nil && info.Size() > 0 {
		last := make([]byte, 1)
		r, rerr := os.Open(path)
		if rerr == nil {
			_, rerr = r.ReadAt(last, info.Size()-1)
			r.Close()
		}
		if rerr != nil {
			return fmt.Errorf("journal: %w", rerr)
		}
		if last[0] != '\n' {
			w.WriteByte('\n')
		}
	}
	var line []byte
	for i := -1; i <= len(recs); i++ {
		r := Record{Op: OpBegin}
		switch {
		case i == len(recs):
			r.Op = OpEnd
		case i >= 0:
			r = recs[i]
		}
		r.Batch = batch
		if line, err = appendLine(line[:0], r); err != nil {
			return fmt.Errorf("journal: %w", err) // a batch without its end: never read
		}
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("journal: append: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("journal: sync: %w", err)
	}
	if created {
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return fmt.Errorf("journal: sync directory: %w", err)
			}
		}
	}
	return f.Close()
}

// Batch is the records of one committed (or, for the last, possibly
// uncommitted) index transaction, without its end record.
type Batch struct {
	Seq     uint64
	Records []Record
}

// Log is what Read found in a journal.
type Log struct {
	Batches    []Batch // in order of their numbers, the last of each number
	BadLines   int     // lines that fail their checksum (torn writes)
	Incomplete int     // batches without an end record (never committed)
	Replaced   int     // batches superseded by a later one of the same number
	Damaged    int     // batches with a bad line inside: lost
	Orphans    int     // good lines outside any batch
	Lines      int
}

// LastSeq is the number of the newest batch, or 0.
func (l *Log) LastSeq() uint64 {
	if len(l.Batches) == 0 {
		return 0
	}
	return l.Batches[len(l.Batches)-1].Seq
}

// Read reads the journal at path. A journal that does not exist is empty.
func Read(path string) (*Log, error) { return readFile(path, true) }

// Check reads the journal at path as Read does, and keeps only the counts
// and the batches' numbers, not their records: what fsck reports of a
// journal whose records (100,000 for an add of as many small tensors) it
// does not need.
func Check(path string) (*Log, error) { return readFile(path, false) }

func readFile(path string, keep bool) (*Log, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Log{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	return read(f, keep)
}

// read reads a journal; keep says whether the batches keep their records.
func read(r io.Reader, keep bool) (*Log, error) {
	l := &Log{}
	byNum := map[uint64][]Record{}
	var cur []Record
	var curSeq uint64
	open, poisoned := false, false
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			l.Lines++
			rec, ok := decodeLine(bytes.TrimSuffix(line, []byte{'\n'}))
			var members []Record
			switch {
			case ok && rec.Op == OpPackRun && keep:
				members, ok = expandPackRun(rec)
			case ok && rec.Op == OpPackRun:
				ok = packRunDecodes(rec)
			}
			if ok && line[len(line)-1] != '\n' {
				ok = false // a last line without its newline is torn
			}
			switch {
			case !ok:
				l.BadLines++
				poisoned = poisoned || open
			case rec.Op == OpBegin:
				if open {
					l.Incomplete++
				}
				open, poisoned, curSeq, cur = true, false, rec.Batch, nil
			case !open:
				l.Orphans++
			case rec.Batch != curSeq:
				l.Incomplete++
				l.Orphans++
				open = false
			case rec.Op == OpEnd && poisoned:
				l.Damaged++
				open = false
			case rec.Op == OpEnd:
				if _, dup := byNum[curSeq]; dup {
					l.Replaced++
				}
				byNum[curSeq] = cur
				open = false
			case !keep:
			case rec.Op == OpPackRun:
				cur = append(cur, members...)
			default:
				cur = append(cur, rec)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("journal: read: %w", err)
		}
	}
	if open {
		l.Incomplete++
	}
	for seq, recs := range byNum {
		l.Batches = append(l.Batches, Batch{Seq: seq, Records: recs})
	}
	sort.Slice(l.Batches, func(i, j int) bool { return l.Batches[i].Seq < l.Batches[j].Seq })
	return l, nil
}
