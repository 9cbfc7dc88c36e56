package store

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/objects"
	"github.com/mstore/mstore/refs"
)

// FsckOptions say how fsck runs.
type FsckOptions struct {
	// Repair removes leftovers: temp files, and blob and pack files the
	// index does not record. It never touches anything recorded.
	Repair bool
	// Workers bounds the blobs re-hashed at once; zero means one per CPU.
	Workers int
	// LockWait bounds the wait for the store's lock; zero means the store's
	// LockTimeout.
	LockWait time.Duration
}

// Finding is one thing fsck reports.
type Finding struct {
	// Kind is what the finding is about: blob, pack, manifest, ref, tag,
	// refs (the refs buckets as a whole), index, temp or file.
	Kind   string `json:"kind"`
	ID     string `json:"id,omitempty"`   // digest, pack id, ref or tag name
	Path   string `json:"path,omitempty"` // relative to the store directory
	Size   int64  `json:"size,omitempty"`
	Detail string `json:"detail"`
}

// FsckReport is what fsck found. Missing and Corrupt are errors: something
// the store promises to hold is not there, or not as recorded.
// Unreferenced (what gc will free) and Leftovers (what a crashed command
// left behind) are not.
type FsckReport struct {
	OK           bool      `json:"ok"`
	Blobs        int       `json:"blobs"` // blobs re-hashed (found or not as recorded)
	Bytes        int64     `json:"bytes"` // bytes re-hashed
	Packs        int       `json:"packs"`
	Manifests    int       `json:"manifests"`
	Refs         int       `json:"refs"`
	Tags         int       `json:"tags"`
	Missing      []Finding `json:"missing"`
	Corrupt      []Finding `json:"corrupt"`
	Unreferenced []Finding `json:"unreferenced"`
	Leftovers    []Finding `json:"leftovers"`
	Repaired     []Finding `json:"repaired"`
}

// need is a blob a manifest needs, with the size the manifest expects.
type need struct {
	digest objects.Digest
	size   int64
}

// fsckState is what fsck read from the index, copied out of the
// transaction.
type fsckState struct {
	recs      map[objects.Digest]BlobRecord
	needs     map[objects.Digest][]need // by manifest, for manifests that decode
	reachable map[objects.Digest]bool
}

// Fsck checks the whole store: the index's own structure, every manifest
// and ref, and the bytes of every blob, re-hashed in parallel. It holds the
// shared lock (the exclusive one with Repair), so that gc never deletes
// what it is checking. It returns an error only when it could not check;
// what it finds is in the report.
func (s *Store) Fsck(ctx context.Context, opts FsckOptions) (*FsckReport, error) {
	mode := LockShared
	if opts.Repair {
		mode = LockExclusive
	}
	lock, err := s.Lock(mode, opts.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()

	r := &FsckReport{Missing: []Finding{}, Corrupt: []Finding{}, Unreferenced: []Finding{}, Leftovers: []Finding{}, Repaired: []Finding{}}
	st := &fsckState{recs: map[objects.Digest]BlobRecord{}, needs: map[objects.Digest][]need{}}
	if err := s.View(func(tx *bolt.Tx) error { return s.checkIndex(tx, r, st) }); err != nil {
		return nil, err
	}
	r.checkNeeds(st)
	files, err := s.checkFiles(r, st)
	if err != nil {
		return nil, err
	}
	if err := s.hashBlobs(ctx, r, st, files, opts.Workers); err != nil {
		return nil, err
	}
	if opts.Repair {
		if err := s.repair(r, files); err != nil {
			return r, err
		}
	}
	for _, l := range [][]Finding{r.Missing, r.Corrupt, r.Unreferenced, r.Leftovers} {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Kind+l[i].ID+l[i].Path < l[j].Kind+l[j].ID+l[j].Path })
	}
	r.OK = len(r.Missing) == 0 && len(r.Corrupt) == 0
	return r, nil
}

// checkIndex reads the index: bbolt's own page checks, the format record,
// the refs, every manifest and every blob record.
func (s *Store) checkIndex(tx *bolt.Tx, r *FsckReport, st *fsckState) error {
	corrupt := func(kind, id, format string, args ...any) {
		r.Corrupt = append(r.Corrupt, Finding{Kind: kind, ID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for err := range tx.Check() {
		corrupt("index", "", "%v", err)
	}
	if err := s.checkFormat(tx); err != nil {
		return err
	}
	err := tx.Bucket(bucketBlobs).ForEach(func(k, v []byte) error {
		d := objects.Digest(k)
		rec, err := decodeBlobRecord(d, v)
		switch {
		case len(k) != len(d):
			corrupt("index", fmt.Sprintf("%x", k), "blob record under a key of %d bytes", len(k))
		case err != nil:
			corrupt("blob", d.String(), "%v", err)
		case rec.Size > objects.ChunkSize || rec.Encoding == EncodingPacked && rec.Size >= PackThreshold:
			corrupt("blob", d.String(), "recorded as %d bytes (%d-byte chunks, packs below %d)", rec.Size, objects.ChunkSize, PackThreshold)
		default:
			st.recs[d] = rec
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = ForEachManifest(tx, func(d objects.Digest) error {
		r.Manifests++
		m, err := Manifest(tx, d)
		if err != nil {
			corrupt("manifest", d.String(), "%v", err)
			return nil
		}
		st.needs[d] = manifestNeeds(m)
		return nil
	})
	if err != nil {
		return err
	}
	if err := refs.Check(tx); err != nil {
		corrupt("refs", "", "%v", err)
	}
	s.checkNames(tx, r, st)
	return nil
}

// checkNames checks that every ref, every entry of its history and every
// tag names a manifest the store has.
func (s *Store) checkNames(tx *bolt.Tx, r *FsckReport, st *fsckState) {
	corrupt := func(err error) { r.Corrupt = append(r.Corrupt, Finding{Kind: "refs", Detail: err.Error()}) }
	has := ManifestIndex{Tx: tx}
	missing := func(kind, name string, d objects.Digest, what string) {
		if !has.HasManifest(d) {
			r.Missing = append(r.Missing, Finding{Kind: "manifest", ID: d.String(), Detail: fmt.Sprintf("%s %s names it (%s)", kind, name, what)})
		}
	}
	list, err := refs.List(tx)
	if err != nil {
		corrupt(err)
	}
	for _, ref := range list {
		r.Refs++
		missing("ref", ref.Name, ref.Current, "its current version")
		hist, err := refs.History(tx, ref.Name)
		if err != nil {
			corrupt(err)
			continue
		}
		for i, e := range hist {
			if i > 0 { // the newest entry is the current version, checked above
				missing("ref", ref.Name, e.Digest, fmt.Sprintf("%s~%d", ref.Name, i))
			}
		}
	}
	tags, err := refs.Tags(tx)
	if err != nil {
		corrupt(err)
	}
	for _, t := range tags {
		r.Tags++
		missing("tag", t.Name+":"+t.Tag, t.Digest, "a tag")
	}
	st.reachable, err = refs.Referenced(tx)
	if err != nil {
		corrupt(err)
		// Without the names, call nothing unreferenced.
		st.reachable = map[objects.Digest]bool{}
		for d := range st.needs {
			st.reachable[d] = true
		}
	}
}

// manifestNeeds lists every blob m needs with the size m expects.
func manifestNeeds(m *objects.Manifest) []need {
	var out []need
	add := func(size int64, chunks []objects.Digest) {
		for i, c := range chunks {
			_, n := objects.ChunkBounds(size, i)
			out = append(out, need{c, n})
		}
	}
	for _, t := range m.Tensors {
		add(t.Size, t.Chunks)
	}
	for _, f := range m.Files {
		for _, e := range f.Extents {
			if e.Data != nil {
				add(e.Size, e.Data.Chunks)
			}
		}
	}
	return out
}

// checkNeeds checks that every blob every manifest needs is recorded with
// the size the manifest expects, and lists what no named version needs.
func (r *FsckReport) checkNeeds(st *fsckState) {
	usedBy := map[objects.Digest]bool{}
	reported := map[objects.Digest]bool{}
	for _, md := range sortedDigests(st.needs) {
		reachable := st.reachable[md]
		if !reachable {
			r.Unreferenced = append(r.Unreferenced, Finding{Kind: "manifest", ID: md.String(), Detail: "no ref, history entry or tag names this version"})
		}
		for _, n := range st.needs[md] {
			if reachable {
				usedBy[n.digest] = true
			}
			rec, ok := st.recs[n.digest]
			switch {
			case reported[n.digest]:
			case !ok:
				reported[n.digest] = true
				r.Missing = append(r.Missing, Finding{Kind: "blob", ID: n.digest.String(), Size: n.size,
					Detail: fmt.Sprintf("manifest %s needs it; the index has no record of it", md.Short())})
			case rec.Size != n.size:
				reported[n.digest] = true
				r.Corrupt = append(r.Corrupt, Finding{Kind: "blob", ID: n.digest.String(), Size: rec.Size,
					Detail: fmt.Sprintf("manifest %s needs %d bytes, the index records %d", md.Short(), n.size, rec.Size)})
			}
		}
	}
	for _, d := range sortedDigests(st.recs) {
		if !usedBy[d] {
			r.Unreferenced = append(r.Unreferenced, Finding{Kind: "blob", ID: d.String(), Size: st.recs[d].Size,
				Detail: "no named version needs it"})
		}
	}
}

func sortedDigests[V any](m map[objects.Digest]V) []objects.Digest {
	out := make([]objects.Digest, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i][:]) < string(out[j][:]) })
	return out
}

// storeFiles is what fsck found on disk.
type storeFiles struct {
	loose     map[objects.Digest]StoredFile
	packs     map[PackID]StoredFile
	leftovers []StoredFile // removed by Repair
}

// checkFiles walks objects/ and tmp/: every file must be a recorded blob
// or pack; others are leftovers.
func (s *Store) checkFiles(r *FsckReport, st *fsckState) (*storeFiles, error) {
	files := &storeFiles{loose: map[objects.Digest]StoredFile{}, packs: map[PackID]StoredFile{}}
	recordedPacks := map[PackID]int64{} // recorded bytes in each pack
	for _, rec := range st.recs {
		if rec.Encoding == EncodingPacked {
			recordedPacks[rec.Pack] += rec.Size
		}
	}
	leftover := func(f StoredFile, detail string) {
		r.Leftovers = append(r.Leftovers, Finding{Kind: f.Kind.String(), ID: fileID(f), Path: f.Rel, Size: f.Size, Detail: detail})
	}
	err := s.WalkFiles(func(f StoredFile) error {
		switch f.Kind {
		case FileTemp:
			leftover(f, "temp file of a command that is running or crashed")
			files.leftovers = append(files.leftovers, f)
		case FileUnknown:
			leftover(f, "not a file mstore writes; left alone")
		case FileLoose:
			if rec, ok := st.recs[f.Digest]; ok && rec.Encoding == EncodingRaw {
				files.loose[f.Digest] = f
				return nil
			}
			if err := verifyFile(f); err != nil {
				leftover(f, "blob file the index does not record, and "+err.Error())
			} else {
				leftover(f, "blob file the index does not record (written by a command that did not finish, or left by gc)")
			}
			files.leftovers = append(files.leftovers, f)
		case FilePack:
			recorded, ok := recordedPacks[f.Pack]
			if !ok {
				leftover(f, "pack the index does not record (written by a command that did not finish, or left by gc)")
				files.leftovers = append(files.leftovers, f)
				return nil
			}
			files.packs[f.Pack] = f
			r.Packs++
			if f.Size > recorded {
				r.Unreferenced = append(r.Unreferenced, Finding{Kind: "pack", ID: f.Pack.String(), Path: f.Rel, Size: f.Size - recorded,
					Detail: fmt.Sprintf("%d of its %d bytes hold no recorded blob (gc repacks it)", f.Size-recorded, f.Size)})
			}
		}
		return nil
	})
	return files, err
}

func fileID(f StoredFile) string {
	switch f.Kind {
	case FileLoose:
		return f.Digest.String()
	case FilePack:
		return f.Pack.String()
	}
	return ""
}

// repair removes the leftovers fsck found.
func (s *Store) repair(r *FsckReport, files *storeFiles) error {
	for _, f := range files.leftovers {
		if err := s.RemoveFile(f.Path); err != nil {
			return err
		}
		r.Repaired = append(r.Repaired, Finding{Kind: f.Kind.String(), ID: fileID(f), Path: f.Rel, Size: f.Size, Detail: "removed"})
	}
	return nil // not synced: a delete lost in a power failure is a leftover again
}

func workerCount(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}
