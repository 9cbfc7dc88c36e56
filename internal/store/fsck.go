package store

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/objects"
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
	// Names is the layer of names (package names gives refs'): fsck checks
	// its records and that every name reaches a manifest, and calls a
	// version no name reaches unreferenced. Without it, names are not
	// checked and nothing is called unreferenced.
	Names Names
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
	// Affects names, for a missing or corrupt blob, what it breaks: each
	// version (with the names that reach it), file and tensor that needs it.
	Affects []string `json:"affects,omitempty"`
	// Heal says how to bring a missing or corrupt blob back.
	Heal string `json:"heal,omitempty"`
}

// maxAffects bounds the list of what one blob breaks.
const maxAffects = 20

// healHint is what fsck tells the user to do about a bad blob. fsck marks
// it suspect, so that the next add of a model that holds its bytes writes
// it again instead of trusting the store's copy.
const healHint = "re-add the model this version came from (`mstore add PATH --name NAME`): the add rewrites this blob from the source and the store is healed; " +
	"or remove the versions that need it (`mstore rm`) and run `mstore gc`"

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
	// Leftovers lists what crashed commands left: temp files in tmp/
	// (Kind "temp", the store's own temp area, checkout leftovers
	// included), blob and pack files the index does not record.
	Leftovers []Finding `json:"leftovers"`
	Repaired  []Finding `json:"repaired"`
	// Warnings are what fsck could not fully judge, and why.
	Warnings []string `json:"warnings"`
}

// need is a blob a manifest needs, with the size the manifest expects and
// where in the manifest.
type need struct {
	digest objects.Digest
	size   int64
	// where is what needs it (a tensor's or file's name, the manifest
	// itself), put in words only for a finding.
	kind needKind
	name string
}

type needKind uint8

const (
	needTensor needKind = iota
	needFile
	needSelf
)

// where says, for a finding, what needs the blob.
func (n need) where() string {
	switch n.kind {
	case needTensor:
		return "tensor " + strconv.Quote(n.name)
	case needFile:
		return "file " + strconv.Quote(n.name)
	}
	return "the manifest itself (its copy for `fsck --rebuild-index`)"
}

// fsckManifest is a manifest fsck read.
type fsckManifest struct {
	digest   objects.Digest
	size     int64 // of its own blob
	readable bool
}

// fsckState is what fsck read from the index, copied out of the
// transaction. What each manifest needs is checked as the manifest is read
// and not kept: every need of every manifest, with its name, was 50 MB of
// fsck's peak on a store of 7 versions of 100,000 tensors. The manifests
// are read again only when a blob is bad, to say what it breaks.
type fsckState struct {
	recs      *fsckRecords
	used      bitset                  // the records a named version needs
	reported  map[objects.Digest]bool // needed blobs found missing or corrupt in the index
	manifests []fsckManifest          // in key order
	reachable map[objects.Digest]bool
	// allReachable: the names are not known, so no version is called
	// unreferenced.
	allReachable bool
	names        map[objects.Digest][]string // the names that reach each version
	layer        Names
	// unreadable: named versions whose manifest does not decode; what
	// they need is unknown, so no blob is called unreferenced.
	unreadable []objects.Digest
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

	r := &FsckReport{Missing: []Finding{}, Corrupt: []Finding{}, Unreferenced: []Finding{}, Leftovers: []Finding{}, Repaired: []Finding{}, Warnings: []string{}}
	st := &fsckState{reported: map[objects.Digest]bool{}, names: map[objects.Digest][]string{}, layer: opts.Names}
	if err := s.checkedView(func(tx *bolt.Tx, canCheck bool) error { return s.checkIndex(tx, canCheck, r, st) }); err != nil {
		return nil, err
	}
	r.listUnreferenced(st)
	files, err := s.checkFiles(r, st)
	if err != nil {
		return nil, err
	}
	if err := s.hashBlobs(ctx, r, st, files, opts.Workers); err != nil {
		return nil, err
	}
	// What follows needs no record. Collected now, not when the heap next
	// reaches twice them: for 700,000 blobs, peak RSS 115 MiB where it was
	// 126 without (the journal's check makes garbage of its own; 165 MB of
	// it before journal.Check stopped expanding pack runs into records).
	// Checking the journal first instead left its heap resident through
	// bbolt's check (152 MiB).
	st.recs, st.used = nil, nil
	runtime.GC()
	if log, err := journal.Check(s.journalPath()); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the journal cannot be read: %v; `fsck --rebuild-index` could not rebuild the index", err))
	} else if log.Damaged > 0 || log.Orphans > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the journal has %d damaged batch(es) and %d stray line(s): what they recorded could not be rebuilt from it", log.Damaged, log.Orphans))
	}
	bad := s.explainBad(r, st)
	if err := s.Update(func(tx *bolt.Tx) error { return MarkSuspect(tx, bad) }); err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("could not mark the %d bad blob(s) for healing in the index: %v", len(bad), err))
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
// every blob record, the refs, and every manifest, whose needs it checks
// against the records.
func (s *Store) checkIndex(tx *bolt.Tx, canCheck bool, r *FsckReport, st *fsckState) error {
	corrupt := func(kind, id, format string, args ...any) {
		r.Corrupt = append(r.Corrupt, Finding{Kind: kind, ID: id, Detail: fmt.Sprintf(format, args...)})
	}
	if canCheck {
		stop := releasing(tx)
		for err := range tx.Check() {
			corrupt("index", "", "%v (run `mstore fsck --rebuild-index`)", err)
		}
		stop()
	} else {
		r.Warnings = append(r.Warnings, "the index is read-only to this process: its page structure (bbolt's check) was not verified, only every record in it")
	}
	// The pages tx.Check read last are released here, those read after
	// as they go.
	releaseIndexPages(tx)
	if err := s.checkFormat(tx); err != nil {
		return err
	}
	manifests := tx.Bucket(bucketManifests)
	var err error
	st.recs, err = readRecords(tx.Bucket(bucketBlobs), func(k []byte, d objects.Digest, rec BlobRecord, err error) bool {
		// A manifest's blob is one loose file whatever its size (28 MB for
		// 100,000 tensors); every other blob is at most a chunk.
		manifest := func() bool { return rec.Encoding == EncodingRaw && !rec.Coded() && manifests.Get(k) != nil }
		switch {
		case len(k) != len(d):
			corrupt("index", fmt.Sprintf("%x", k), "blob record under a key of %d bytes", len(k))
		case err != nil:
			corrupt("blob", d.String(), "%v", err)
		case rec.Size > objects.ChunkSize && !manifest() || rec.Encoding == EncodingPacked && !rec.Coded() && rec.Size >= PackThreshold:
			corrupt("blob", d.String(), "recorded as %d bytes (%d-byte chunks, raw packed blobs below %d)", rec.Size, objects.ChunkSize, PackThreshold)
		default:
			return true
		}
		return false
	})
	if err != nil {
		return err
	}
	// The names first: whether a version is reachable says, as its
	// manifest is read, whether what it needs is used.
	if st.layer == nil {
		r.Warnings = append(r.Warnings, "names (refs, tags) were not checked")
		st.allReachable = true
	} else {
		if err := st.layer.Check(tx); err != nil {
			corrupt("refs", "", "%v", err)
		}
		s.checkNames(tx, st.layer, r, st)
	}
	st.used = newBitset(len(st.recs.list))
	return ForEachManifest(tx, func(md objects.Digest) error {
		r.Manifests++
		reachable := st.allReachable || st.reachable[md]
		if !reachable {
			r.Unreferenced = append(r.Unreferenced, Finding{Kind: "manifest", ID: md.String(), Detail: "no ref, history entry or tag names this version"})
		}
		size, _ := ManifestSize(tx, md)
		CollectBeforeManifest(size)
		m, err := s.Manifest(tx, md)
		if err != nil {
			corrupt("manifest", md.String(), "%v", err)
			st.unreadable = append(st.unreadable, md)
		}
		st.manifests = append(st.manifests, fsckManifest{digest: md, size: size, readable: err == nil})
		eachNeed(m, md, size, func(n need) { r.checkNeed(st, md, reachable, n) })
		releaseIndexPages(tx)
		return nil
	})
}

// checkNames checks that every ref, every entry of its history and every
// tag names a manifest the store has.
func (s *Store) checkNames(tx *bolt.Tx, names Names, r *FsckReport, st *fsckState) {
	corrupt := func(err error) { r.Corrupt = append(r.Corrupt, Finding{Kind: "refs", Detail: err.Error()}) }
	has := ManifestIndex{Tx: tx}
	missing := func(kind, name string, d objects.Digest, what string) {
		if !has.HasManifest(d) {
			r.Missing = append(r.Missing, Finding{Kind: "manifest", ID: d.String(), Detail: fmt.Sprintf("%s %s names it (%s)", kind, name, what)})
		}
	}
	refCount, tagCount, problems := names.EachName(tx, func(kind, name string, d objects.Digest, what string) {
		st.names[d] = append(st.names[d], name)
		if kind == "ref" {
			name, _, _ = strings.Cut(name, "~")
		}
		missing(kind, name, d, what)
	})
	r.Refs, r.Tags = refCount, tagCount
	for _, err := range problems {
		corrupt(err)
	}
	var err error
	st.reachable, err = names.Referenced(tx)
	if err != nil {
		corrupt(err)
		// Without the names, call nothing unreferenced.
		st.allReachable = true
	}
}

// eachNeed calls fn for every blob m (manifest md, whose own blob is size
// bytes) needs, with the size m expects, in m's order, and last for md's
// own blob. A nil m (a manifest that does not decode) needs only that: its
// bytes are its blob's, and a damaged blob names the version.
func eachNeed(m *objects.Manifest, md objects.Digest, size int64, fn func(need)) {
	if m != nil {
		add := func(size int64, chunks []objects.Digest, kind needKind, name string) {
			for i, c := range chunks {
				_, n := objects.ChunkBounds(size, i)
				fn(need{digest: c, size: n, kind: kind, name: name})
			}
		}
		for _, t := range m.Tensors {
			add(t.Size, t.Chunks, needTensor, t.Name)
		}
		for _, f := range m.Files {
			for _, e := range f.Extents {
				if e.Data != nil {
					add(e.Size, e.Data.Chunks, needFile, f.Path)
				}
			}
		}
	}
	fn(need{digest: md, size: size, kind: needSelf})
}

// checkNeed checks that blob n, which manifest md needs, is recorded with
// the size md expects, and marks it used when md is reachable. Each bad
// blob is reported once, for the first manifest (in key order) to need it.
func (r *FsckReport) checkNeed(st *fsckState, md objects.Digest, reachable bool, n need) {
	i, ok := st.recs.find(n.digest)
	if reachable && ok {
		st.used.set(i)
	}
	switch {
	case st.reported[n.digest]:
	case !ok:
		st.reported[n.digest] = true
		r.Missing = append(r.Missing, Finding{Kind: "blob", ID: n.digest.String(), Size: n.size,
			Detail: fmt.Sprintf("manifest %s needs it; the index has no record of it", md.Short())})
	case st.recs.size(i) != n.size:
		st.reported[n.digest] = true
		r.Corrupt = append(r.Corrupt, Finding{Kind: "blob", ID: n.digest.String(), Size: st.recs.size(i),
			Detail: fmt.Sprintf("manifest %s needs %d bytes, the index records %d", md.Short(), n.size, st.recs.size(i))})
	}
}

// explainBad fills in, for every missing or corrupt blob, what it breaks
// and how to heal it, and returns those blobs with why (for MarkSuspect).
// It reads the manifests fsck checked again, one at a time, and only when
// some blob is bad: 0.3 s more for the 7 versions of 100,000 tensors of
// bench/growth.sh, where keeping every need with its name cost 50 MB.
func (s *Store) explainBad(r *FsckReport, st *fsckState) map[objects.Digest]string {
	bad := map[objects.Digest]string{}
	for _, l := range []*[]Finding{&r.Missing, &r.Corrupt} {
		for _, f := range *l {
			if f.Kind != "blob" {
				continue
			}
			if d, err := objects.ParseDigest(f.ID); err == nil {
				bad[d] = f.Detail
			}
		}
	}
	if len(bad) == 0 {
		return bad
	}
	affects := map[objects.Digest][]string{}
	more := map[objects.Digest]int{}
	var unread []string // manifests that no longer read
	err := s.View(func(tx *bolt.Tx) error {
		for _, fm := range st.manifests {
			var m *objects.Manifest
			if fm.readable {
				var err error
				if m, err = s.Manifest(tx, fm.digest); err != nil {
					unread = append(unread, fm.digest.Short())
				}
			}
			version := "version " + fm.digest.Short()
			if names := st.names[fm.digest]; len(names) > 0 {
				version += " (" + strings.Join(names, ", ") + ")"
			} else {
				version += " (no name reaches it)"
			}
			seen := map[string]bool{}
			eachNeed(m, fm.digest, fm.size, func(n need) {
				if _, ok := bad[n.digest]; !ok {
					return
				}
				where := n.where()
				key := n.digest.String() + where
				if seen[key] {
					return
				}
				seen[key] = true
				if len(affects[n.digest]) == maxAffects {
					more[n.digest]++
					return
				}
				affects[n.digest] = append(affects[n.digest], version+": "+where)
			})
		}
		return nil
	})
	if err == nil && len(unread) > 0 {
		err = fmt.Errorf("version(s) %s no longer read", strings.Join(unread, ", "))
	}
	if err != nil {
		r.Warnings = append(r.Warnings, fmt.Sprintf("what the bad blobs break is not fully known: %v", err))
	}
	for _, l := range []*[]Finding{&r.Missing, &r.Corrupt} {
		for i, f := range *l {
			d, err := objects.ParseDigest(f.ID)
			if _, ok := bad[d]; f.Kind != "blob" || err != nil || !ok {
				continue
			}
			a := affects[d]
			if n := more[d]; n > 0 {
				a = append(a, fmt.Sprintf("… and %d more", n))
			}
			if len(a) == 0 {
				a = []string{"no version needs it"}
			}
			(*l)[i].Affects, (*l)[i].Heal = a, healHint
		}
	}
	return bad
}

// listUnreferenced lists the blobs no named version needs, once every
// manifest's needs are checked.
func (r *FsckReport) listUnreferenced(st *fsckState) {
	if len(st.unreadable) > 0 {
		var ids []string
		for _, d := range st.unreadable {
			ids = append(ids, d.Short())
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("version(s) %s cannot be read: which blobs they need is unknown, so no blob is called unreferenced", strings.Join(ids, ", ")))
		return
	}
	// A delta's base is needed as long as the delta is.
	for _, b := range st.recs.bases {
		if st.used.has(int(b.i)) {
			if j, ok := st.recs.find(b.base); ok {
				st.used.set(j)
			}
		}
	}
	for i := range st.recs.list {
		if !st.used.has(i) {
			r.Unreferenced = append(r.Unreferenced, Finding{Kind: "blob", ID: st.recs.list[i].digest.String(), Size: st.recs.size(i),
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
	// loose is the file of each recorded loose blob that has one, in
	// record order: 16 bytes each, where a map of StoredFiles held 120
	// and two paths of 80-odd bytes for each, and a store of large
	// tensors' chunks is almost all loose blobs.
	loose     []looseFile
	packs     map[PackID]StoredFile
	leftovers []StoredFile // removed by Repair
}

// checkFiles walks objects/ and tmp/: every file must be a recorded blob
// or pack; others are leftovers.
func (s *Store) checkFiles(r *FsckReport, st *fsckState) (*storeFiles, error) {
	files := &storeFiles{packs: map[PackID]StoredFile{}}
	recordedPacks := map[PackID]int64{} // recorded bytes in each pack
	for i := range st.recs.list {
		if rec := &st.recs.list[i]; rec.enc == EncodingPacked {
			recordedPacks[st.recs.packs[rec.pack]] += st.recs.storedSize(i)
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
			if i, ok := st.recs.find(f.Digest); ok && st.recs.list[i].enc == EncodingRaw {
				files.loose = append(files.loose, looseFile{i: uint32(i), size: f.Size})
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
	sort.Slice(files.loose, func(a, b int) bool { return files.loose[a].i < files.loose[b].i })
	return files, err
}

// looseFile is the file of record i, of size bytes, at its BlobPath.
type looseFile struct {
	i    uint32
	size int64
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
