package mpk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/mstore/mstore/internal/errs"
)

// checkJSON reads b as exactly one JSON value. It refuses bytes that are
// not UTF-8, bad syntax, a second value, and duplicate keys in any object
// (schema_error; keys are compared after unescaping), and nesting of
// arrays and objects deeper than maxDepth (size_limit_exceeded; the
// outermost object is depth 1). With keep it returns the value (objects as
// map[string]any, numbers as json.Number); else only checks.
func checkJSON(b []byte, maxDepth int, keep bool) (any, *problem) {
	if !utf8.Valid(b) {
		return nil, refuse(errs.SchemaError, "not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	c := jsonChecker{dec: dec, maxDepth: maxDepth, keep: keep}
	v, p := c.value(0)
	if p != nil {
		return nil, p
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, c.at(errs.SchemaError, "more than one JSON value")
	}
	return v, nil
}

type jsonChecker struct {
	dec      *json.Decoder
	maxDepth int
	keep     bool
}

func (c *jsonChecker) at(class errs.Class, msg string) *problem {
	return &problem{class: class, off: c.dec.InputOffset(), msg: msg}
}

func (c *jsonChecker) syntax(err error) *problem {
	if errors.Is(err, io.EOF) {
		return c.at(errs.SchemaError, "not JSON: unexpected end")
	}
	return c.at(errs.SchemaError, "not JSON: "+err.Error())
}

// value reads one value whose enclosing containers number depth.
func (c *jsonChecker) value(depth int) (any, *problem) {
	tok, err := c.dec.Token()
	if err != nil {
		return nil, c.syntax(err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if depth+1 > c.maxDepth {
		return nil, &problem{class: errs.SizeLimitExceeded, off: c.dec.InputOffset(),
			msg: "JSON nested deeper than max_json_depth (" + itoa(int64(c.maxDepth)) + ")"}
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		var obj map[string]any
		if c.keep {
			obj = map[string]any{}
		}
		for c.dec.More() {
			kt, err := c.dec.Token()
			if err != nil {
				return nil, c.syntax(err)
			}
			key, _ := kt.(string) // the decoder only gives strings as keys
			if seen[key] {
				return nil, c.at(errs.SchemaError, "duplicate key "+quote(key))
			}
			seen[key] = true
			v, p := c.value(depth + 1)
			if p != nil {
				return nil, p
			}
			if c.keep {
				obj[key] = v
			}
		}
		if _, err := c.dec.Token(); err != nil {
			return nil, c.syntax(err)
		}
		if c.keep {
			return obj, nil
		}
		return nil, nil
	default: // '[': the decoder never starts a value with '}' or ']'
		var arr []any
		if c.keep {
			arr = []any{}
		}
		for c.dec.More() {
			v, p := c.value(depth + 1)
			if p != nil {
				return nil, p
			}
			if c.keep {
				arr = append(arr, v)
			}
		}
		if _, err := c.dec.Token(); err != nil {
			return nil, c.syntax(err)
		}
		if c.keep {
			return arr, nil
		}
		return nil, nil
	}
}
