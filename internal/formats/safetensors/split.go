package safetensors

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/strictjson"
)

// A header of 100,000 tensors is 10 MB of JSON, and its parse took 0.1 s
// on one core while the other idled (readHeaders gives one goroutine to a
// file). splitter.parse cuts such a header at commas between its top-level
// members and reads the parts at once, each with a strictjson.Reader, an
// entryReader and a duplicate map of its own.
//
// It only ever accelerates: when any part fails for any reason, when a
// name is in two parts, when the parts together pass the budget or the
// tensors do not tile the data section, it returns nil and parseHeader
// reads the header again with parseSerial, whose result or error (class,
// message, offset) is then the answer. So only an input that the serial
// parse accepts can come out of here, and it must come out as that parse
// gives it:
//
//   - The JSON of an object is '{' member (',' member)* '}'. Cut at
//     commas, the first part is '{' member (',' member)*, a middle one
//     member (',' member)*, the last member (',' member)* '}', and
//     strictjson's Members reads exactly these. When every part reads,
//     the whole is an object whose members are the parts' members in
//     order, and JSON's grammar is unambiguous, so they are the members
//     the serial parse reads: same keys, same values, same file offsets
//     (each reader's base is its part's), same depth (a part starts
//     inside the object). Members documents why the end of a part's bytes
//     reads as the ',' after it does.
//   - Where the cuts fall is therefore irrelevant to correctness: a cut
//     that is not between two top-level members makes a part fail.
//   - UTF-8: the parts' readers check their bytes (strictjson.New), and
//     the cuts are ASCII commas, so the whole is valid exactly when every
//     part is.
//   - Each part checks its own entries and its own duplicates; a name (or
//     __metadata__) in two parts is a duplicate that only the serial parse
//     may report.
//   - The budget: each charge is ≥ 0, so the serial parse passes its budget
//     exactly when the sum of its charges does, and the parts charge what
//     it charges. That sum is taken from the budget only on success.
//   - checkOffsets sorts by (begin, end, name), a total order once names
//     are unique, so the parts' tensors, joined in order, sort and check
//     as the serial parse's do.

// splitter says how headers are cut: parts of at least min bytes (a
// header is read in parts from twice that), at most parts of them, cut
// where cuts says. Tests and the fuzzer use their own, to split tiny
// headers and cut them anywhere.
type splitter struct {
	min, parts int
	cuts       func(hdr []byte, k int) []int
}

// split is the splitter of every parse. Parts of 1 MiB at least (10,000
// tensors, 5-10 ms of work): the gain on headers of 0.2-1.7 MB was within
// the noise of a loaded machine, and the goroutine, the probes across the
// parts' maps and the tail after them are a larger share of a small one.
var split = splitter{min: 1 << 20, parts: runtime.GOMAXPROCS(0), cuts: cutPoints}

// gcAfter is the least header whose failed parts are collected before
// the serial parse.
const gcAfter = 4 << 20

// errOverBudget stops a part whose charges, with the other parts', pass
// the budget: the serial parse then reports it.
var errOverBudget = errors.New("over the parse budget")

// header reads hdr as parseHeader does, cut as s says.
func (s splitter) header(path string, hdr []byte, dataLen int64, budget *formats.Budget) (*header, error) {
	cuts := s.cutsOf(hdr)
	if cuts == nil {
		return parseSerial(path, hdr, dataLen, budget)
	}
	if h := s.parse(path, hdr, cuts, dataLen, budget); h != nil {
		return h, nil
	}
	// What the parts built is garbage now: collected before the serial
	// parse builds it again, a refused header peaks no higher than the
	// serial parse alone (the GC would wait for twice the live heap). A
	// refused header of 24 MB under a 32 MiB budget peaked at 119 MiB, not
	// 125-138. Below gcAfter, the garbage is small and the GC not worth it.
	if len(hdr) >= gcAfter {
		runtime.GC()
	}
	return parseSerial(path, hdr, dataLen, budget)
}

// cutsOf is where s cuts hdr, or nil to read it in one part.
func (s splitter) cutsOf(hdr []byte) []int {
	k := min(s.parts, len(hdr)/s.min)
	if k < 2 {
		return nil
	}
	cuts := s.cuts(hdr, k)
	for i, at := range cuts {
		if at < 0 || at >= len(hdr) || hdr[at] != ',' || i > 0 && at <= cuts[i-1] {
			return nil // the parts would not cover hdr but its commas
		}
	}
	if len(cuts) == 0 {
		return nil // not []int{}: nil is "one part"
	}
	return cuts
}

// parse reads hdr in parts cut at cuts, at once, or returns nil (see
// above).
func (s splitter) parse(path string, hdr []byte, cuts []int, dataLen int64, budget *formats.Budget) *header {
	room := room(budget)
	shared := &sharedCharge{room: room}

	// One array for all the tensors, each part appending to its own region
	// of it (sized by its guess, as the serial parse sizes its one), so that
	// joining them is at most a move, and memory is what the serial parse
	// takes.
	bounds := make([]int, 0, len(cuts)+2)
	bounds = append(bounds, -1)
	bounds = append(bounds, cuts...)
	bounds = append(bounds, len(hdr))
	guesses := make([]int, len(bounds)-1)
	total := 0
	for i := range guesses {
		guesses[i] = partGuess(hdr[bounds[i]+1 : bounds[i+1]])
		total += guesses[i]
	}
	all := make([]entry, 0, total)

	parts := make([]*part, len(guesses))
	failed := make([]error, len(guesses))
	var wg sync.WaitGroup
	off, admit := 0, admits(room)
	for i := range parts {
		from, to := bounds[i]+1, bounds[i+1]
		region := all[off : off : off+guesses[i]]
		off += guesses[i]
		n := min(guesses[i], admit) // of the entries the budget admits, in order
		admit -= n
		read := func() {
			parts[i], failed[i] = readPart(path, hdr, from, to, dataLen, region, guesses[i], n, shared, i == 0, i == len(parts)-1)
		}
		if i == len(parts)-1 {
			read() // on this goroutine
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); read() }()
	}
	wg.Wait()
	for _, err := range failed {
		if err != nil {
			return nil
		}
	}
	if dupAcross(parts) {
		return nil
	}
	h := &header{frameSize: lengthPrefix + int64(len(hdr)), tensors: join(all, parts, guesses)}
	for _, p := range parts {
		if p.meta != nil {
			h.meta = p.meta
		}
	}
	if checkOffsets(path, h, dataLen) != nil {
		return nil
	}
	if used := shared.used.Load(); used > room || budget.Charge(used) != nil {
		return nil // not reached: each part checked it
	}
	return h
}

// readPart reads hdr[from:to], one part of the header.
func readPart(path string, hdr []byte, from, to int, dataLen int64, tensors []entry, guess, admit int, shared *sharedCharge, first, last bool) (*part, error) {
	b := hdr[from:to]
	r, err := strictjson.New(b, lengthPrefix+int64(from), pkg, path)
	if err != nil {
		return nil, err
	}
	c := &partCharge{shared: shared}
	p := newPart(r, guess, dataLen, tensors, admit, c.charge)
	if err := r.Members(p.member, first, last); err != nil {
		return nil, err
	}
	if last {
		if err := r.End(); err != nil {
			return nil, err
		}
	}
	return p, c.flush()
}

// cutPoints returns up to k-1 increasing offsets of commas in hdr that
// look like they sit between two top-level members (a '}' before, a '"'
// after, white space aside: the end of a tensor's entry), the first at or
// after each k-th of hdr. A comma of that look inside a string, or deeper
// down, only makes a part fail (see above), so this needs to be fast
// rather than right: it looks at a few bytes around each comma.
func cutPoints(hdr []byte, k int) []int {
	var cuts []int
	from := 0
	for i := 1; i < k; i++ {
		from = max(from, i*len(hdr)/k)
		end := min((i+1)*len(hdr)/k, len(hdr))
		for from < end {
			j := bytes.IndexByte(hdr[from:end], ',')
			if j < 0 {
				from = end
				break
			}
			at := from + j
			from = at + 1
			if before(hdr, at) == '}' && after(hdr, at) == '"' {
				cuts = append(cuts, at)
				break
			}
		}
	}
	return cuts
}

// before is the last byte before at that is not white space, or 0.
func before(b []byte, at int) byte {
	for at--; at >= 0; at-- {
		if c := b[at]; !space(c) {
			return c
		}
	}
	return 0
}

// after is the first byte after at that is not white space, or 0.
func after(b []byte, at int) byte {
	for at++; at < len(b); at++ {
		if c := b[at]; !space(c) {
			return c
		}
	}
	return 0
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// dupAcross reports a key in two parts. A part's keys are its tensors'
// names and __metadata__ (each checked against its own map within the
// part); a later part's keys are looked up in the earlier parts' maps.
func dupAcross(parts []*part) bool {
	for i := 1; i < len(parts); i++ {
		_, meta := parts[i].seen[metadataKey]
		for _, q := range parts[:i] {
			if _, dup := q.seen[metadataKey]; dup && meta {
				return true
			}
			for _, e := range parts[i].tensors {
				if _, dup := q.seen[e.name]; dup {
					return true
				}
			}
		}
	}
	return false
}

// join returns the parts' tensors in order in one slice. Each part
// appended to its region of all (guesses[i] long), which starts at or
// after where its tensors go: each is left in place or moved down, over
// nothing a later part still holds. When a part outgrew its region (its
// slice is its own), all of them are copied to a new slice.
func join(all []entry, parts []*part, guesses []int) []entry {
	n := 0
	outgrown := false
	for i, p := range parts {
		n += len(p.tensors)
		outgrown = outgrown || len(p.tensors) > guesses[i]
	}
	if outgrown {
		all = make([]entry, 0, n)
	}
	out, region := all[:0], 0
	for i, p := range parts {
		if len(out) == region && !outgrown {
			out = out[:region+len(p.tensors)] // where the part put them
		} else {
			out = append(out, p.tensors...)
		}
		region += guesses[i]
	}
	return out
}

// sharedCharge is the budget's room shared by the parts.
type sharedCharge struct {
	used atomic.Int64
	room int64
}

// partCharge is one part's charges, added to the shared sum a batch at a
// time: an atomic add per tensor from both cores would bounce the line.
// The parts build at most a batch each beyond the room before they stop.
type partCharge struct {
	shared  *sharedCharge
	pending int64
}

const chargeBatch = 64 << 10

func (c *partCharge) charge(n int64) error {
	if n < 0 {
		return errOverBudget // as Budget.Charge refuses it
	}
	if c.pending += n; c.pending < chargeBatch {
		return nil
	}
	return c.flush()
}

func (c *partCharge) flush() error {
	used := c.shared.used.Add(c.pending)
	c.pending = 0
	if used > c.shared.room {
		return errOverBudget
	}
	return nil
}
