package objects

import "strconv"

// PeekLogicalBytes reads LogicalBytes (the sum of the files' sizes) out of
// a manifest's canonical encoding without decoding it: ls shows the size
// of thousands of versions, and decoding each whole manifest (every
// tensor, every chunk digest) would take seconds. It only reads the shape
// the encoder writes ({"schema":…,"format":…,"files":[{"path":…,"size":N,
// …},…],"tensors":…), skipping each file's other fields by their
// brackets and strings; anything else gives ok false, and the caller
// decodes the manifest instead. It checks nothing else: fsck does.
func PeekLogicalBytes(enc []byte) (total int64, ok bool) {
	p := peeker{b: enc}
	if !p.lit(`{"schema":`) || !p.digits() || !p.lit(`,"format":`) || !p.str() || !p.lit(`,"files":`) {
		return 0, false
	}
	if p.lit("null") || p.lit("[]") {
		return 0, p.lit(`,"tensors":`)
	}
	if !p.lit("[") {
		return 0, false
	}
	for {
		start := p.i
		if !p.lit(`{"path":`) || !p.str() || !p.lit(`,"size":`) {
			return 0, false
		}
		from := p.i
		if !p.digits() {
			return 0, false
		}
		n, err := strconv.ParseInt(string(p.b[from:p.i]), 10, 64)
		if err != nil || total+n < total {
			return 0, false
		}
		total += n
		p.i = start
		if !p.skipObject() {
			return 0, false
		}
		if p.lit(",") {
			continue
		}
		return total, p.lit("]") && p.lit(`,"tensors":`)
	}
}

type peeker struct {
	b []byte
	i int
}

// lit consumes s if the input goes on with it.
func (p *peeker) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// digits consumes one or more decimal digits.
func (p *peeker) digits() bool {
	from := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > from
}

// str consumes a JSON string, escapes included.
func (p *peeker) str() bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	for p.i++; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '\\':
			p.i++
		case '"':
			p.i++
			return true
		}
	}
	return false
}

// skipObject consumes the object that starts here, however deep.
func (p *peeker) skipObject() bool {
	depth := 0
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			if !p.str() {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				p.i++
				return true
			}
		}
		p.i++
	}
	return false
}
