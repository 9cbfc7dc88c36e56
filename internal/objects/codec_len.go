package objects

import "strconv"

// encodedLen is the length of m's canonical encoding (encodeManifest), to
// size its buffer: exact when its text is plain ASCII, a bound otherwise.
// A manifest of 100,000 tensors is 27 MB; an estimate with room to spare
// held 33 MB for it at the peak of the add.
func encodedLen(m *Manifest) int {
	return headLen(m) + tensorsLen(m, 0, len(m.Tensors)) + tailLen(m)
}

// headLen is the length of what encodeRange(m, 0, …) writes before the
// first tensor, the tensor list's bracket included; tensorsLen that of
// tensors from to to, each after its comma (the first excepted); tailLen
// that of what follows the last tensor. The parts of encodedLen, exact or
// a bound as it is.
func headLen(m *Manifest) int {
	n := len(`{"schema":`) + intLen(int64(m.Schema)) + len(`,"format":`) + stringLen(m.Format) + len(`,"files":`)
	n += listLen(len(m.Files), m.Files == nil, func(i int) int { return fileLen(&m.Files[i]) })
	n += len(`,"tensors":`)
	if m.Tensors == nil {
		return n + len("null")
	}
	return n + len("[")
}

func tensorsLen(m *Manifest, from, to int) int {
	n := 0
	for i := from; i < to; i++ {
		if i > 0 {
			n++ // the comma before it
		}
		n += tensorLen(&m.Tensors[i])
	}
	return n
}

func tailLen(m *Manifest) int {
	n := 0
	if m.Tensors != nil {
		n += len("]")
	}
	if len(m.Meta) > 0 {
		n += len(`,"meta":`) + metaLen(m.Meta)
	}
	return n + len(`}`)
}

// listLen is the length of a JSON list of n items, null when isNil.
func listLen(n int, isNil bool, item func(int) int) int {
	if isNil {
		return len("null")
	}
	l := 2 + max(n-1, 0) // brackets and commas
	for i := range n {
		l += item(i)
	}
	return l
}

func fileLen(f *File) int {
	n := len(`{"path":`) + stringLen(f.Path) + len(`,"size":`) + intLen(f.Size) + len(`,"digest":`) + digestLen +
		len(`,"role":`) + stringLen(string(f.Role))
	if len(f.Meta) > 0 {
		n += len(`,"meta":`) + metaLen(f.Meta)
	}
	n += len(`,"extents":`)
	n += listLen(len(f.Extents), f.Extents == nil, func(i int) int {
		e := &f.Extents[i]
		l := len(`{"kind":`) + stringLen(string(e.Kind)) + len(`,"size":`) + intLen(e.Size) + len(`}`)
		if e.Tensor != 0 {
			l += len(`,"tensor":`) + intLen(int64(e.Tensor))
		}
		if e.Data != nil {
			l += len(`,"data":{"digest":`) + digestLen + len(`,"chunks":`) + digestsLen(e.Data.Chunks) + len(`}`)
		}
		return l
	})
	return n + len(`}`)
}

func tensorLen(t *Tensor) int {
	n := len(`{"name":`) + stringLen(t.Name) + len(`,"dtype":`) + stringLen(t.DType) + len(`,"shape":`)
	n += listLen(len(t.Shape), t.Shape == nil, func(i int) int { return intLen(t.Shape[i]) })
	return n + len(`,"size":`) + intLen(t.Size) + len(`,"digest":`) + digestLen + len(`,"chunks":`) + digestsLen(t.Chunks) + len(`}`)
}

func metaLen(meta map[string]string) int {
	n := 2 + max(len(meta)-1, 0)
	for k, v := range meta {
		n += stringLen(k) + 1 + stringLen(v)
	}
	return n
}

// digestLen is a digest in quotes.
const digestLen = 2 + 2*len(Digest{})

func digestsLen(ds []Digest) int {
	return listLen(len(ds), ds == nil, func(int) int { return digestLen })
}

// stringLen is s in quotes: as it is when plain ASCII (appendString), else
// at most six bytes for each of its bytes (\u00XX; an invalid byte becomes
// \ufffd, U+2028 three bytes become six).
func stringLen(s string) int {
	if plainASCII(s) {
		return len(s) + 2
	}
	return 6*len(s) + 2
}

func intLen(v int64) int {
	var b [20]byte
	return len(strconv.AppendInt(b[:0], v, 10))
}
