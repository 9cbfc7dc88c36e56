package restorer

import (
	"cmp"
	"errors"
	"fmt"
	"sync"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/objects"
)

// A tensor whose transform maps each element on its own (a --dtype cast,
// formats.Planned.ByChunk) and whose source is several chunks is written
// as one derived piece per source chunk, each made from that chunk alone
// in a fetch of its own: `checkout --dtype f32` of a model with a 134 MB
// F16 embedding held the embedding, its 268 MB cast and the collector's
// headroom at once (765 MiB peak), and faulted in fresh pages for all of
// it.
//
// The parts are made on any core, but each is hashed after the one
// before it (castStream.turns) into the stream's two hashers: the
// source's bytes, which the last part checks against the source tensor's
// digest as a whole-tensor apply does, and the bytes made, whose digest
// the last part records for verifyRelayout. A part that is not made
// fails the parts after it with its own error (and class).

// castStream is what the parts of one tensor share.
type castStream struct {
	source, made *objects.Hasher
	turns        []chan struct{} // turns[k] is closed once part k has hashed, or will not
	failed       []error         // why part k did not hash (nil: it did), set before turns[k] is closed
}

// castPart is a derived piece's place in its tensor's stream.
type castPart struct {
	stream *castStream
	index  int
	once   sync.Once
}

// finish ends part p's turn: the next part may hash. A part that did not
// hash (cause, why) fails those after it.
func (p *castPart) finish(cause error) {
	p.once.Do(func() {
		p.stream.failed[p.index] = cause
		close(p.stream.turns[p.index])
	})
}

// errNotMade is the cause of a part that ended without an error of its
// own: never, as blobSource.read and make end their parts.
var errNotMade = errors.New("checkout: a chunk was not made")

// castParts returns the pieces of d, a derived tensor of size bytes
// (planned tensor tensor-1), made a chunk of its source at a time, or nil
// when it is made whole: a source of one chunk, or chunks whose share of
// the output is not a whole number of bytes (never for a cast, whose
// chunks hold whole elements).
func castParts(d *derived, size int64, tensor int) []piece {
	src := d.source
	n := len(src.Chunks)
	if n < 2 || src.Size <= 0 || size <= 0 {
		return nil
	}
	// Each chunk of in bytes makes in*size/src.Size: the ratio in lowest
	// terms (an element's size out over in), so that nothing overflows.
	g := gcd(size, src.Size)
	num, den := size/g, src.Size/g
	s := &castStream{source: objects.NewHasher(), made: objects.NewHasher(), turns: make([]chan struct{}, n), failed: make([]error, n)}
	out := make([]piece, n)
	var total int64
	for k := range n {
		_, in := objects.ChunkBounds(src.Size, k)
		if in%den != 0 || in/den > (1<<62)/num {
			return nil
		}
		made := in / den * num
		s.turns[k] = make(chan struct{})
		part := *d
		part.part = &castPart{stream: s, index: k}
		out[k] = piece{derived: &part, size: made, tensor: int32(tensor)}
		total += made
	}
	if total != size {
		return nil
	}
	return out
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// make applies d's transform to src, the verified bytes of the source's
// chunk p.index, then, once the part before it has, hashes src and what
// it made into the stream; the last part checks the source's digest and
// records the made tensor's.
func (p *castPart) make(d *derived, src []byte, size int64) (out []byte, err error) {
	hashed := false
	defer func() {
		if hashed {
			p.finish(nil)
		} else {
			p.finish(cmp.Or(err, errNotMade))
		}
	}()
	out, err = d.transform(src)
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("checkout: transform of chunk %d of %q made %d bytes, the plan says %d", p.index, d.source.Name, len(out), size)
	}
	s := p.stream
	if p.index > 0 {
		<-s.turns[p.index-1] // every part before it runs, or has run, and ends its turn (blobSource.read)
		if cause := s.failed[p.index-1]; cause != nil {
			return nil, fmt.Errorf("checkout: tensor %q: chunk %d was not made: %w", d.source.Name, p.index-1, cause)
		}
	}
	s.source.Write(src)
	s.made.Write(out)
	hashed = true
	if p.index < len(s.turns)-1 {
		return out, nil
	}
	if got := s.source.Digest(); got != d.source.Digest {
		return nil, errs.New(errs.IntegrityError, "checkout", "tensor %s: content hashes to %s, want %s", d.source.Name, got.Short(), d.source.Digest.Short())
	}
	*d.digest = s.made.Digest()
	return out, nil
}
