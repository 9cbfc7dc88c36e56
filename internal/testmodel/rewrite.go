package testmodel

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/formats/gguf"
	"github.com/mstore/mstore/internal/formats/pytorch"
	"github.com/mstore/mstore/internal/formats/safetensors"
)

// Rewrite is a model file and another content of the same size that a
// writer could put in its place while an add reads it: the tests that
// prove add stores only what its parser approved.
type Rewrite struct {
	Format    string // the codec's name
	File      string // the file's name
	Original  []byte // a valid file
	Rewritten []byte // the same size, other content
}

// rewriteTensors are the tensors of every rewrite fixture.
func rewriteTensors() ([]formats.Tensor, [][]byte) {
	ts := []formats.Tensor{
		{Name: "embed.weight", DType: "F32", Shape: []int64{64, 16}, Size: 64 * 16 * 4},
		{Name: "norm.weight", DType: "F32", Shape: []int64{16}, Size: 16 * 4},
	}
	data := make([][]byte, len(ts))
	for i, t := range ts {
		data[i] = make([]byte, t.Size)
		for j := range data[i] {
			data[i][j] = byte(i*31 + j*7)
		}
	}
	return ts, data
}

// Rewrites returns one rewrite per format: SafeTensors whose header gives
// a tensor another dtype; GGUF whose general.name changes; a PyTorch
// checkpoint whose data.pkl becomes a call of posix.system(cmd) (its CRC-32
// fixed, so the zip is sound). cmd must be short (a few dozen bytes).
func Rewrites(cmd string) ([]Rewrite, error) {
	ts, data := rewriteTensors()
	var out []Rewrite

	l, err := safetensors.Plan(ts, safetensors.PlanOptions{})
	if err != nil {
		return nil, err
	}
	st, err := materialize(l, data)
	if err != nil {
		return nil, err
	}
	out = append(out, Rewrite{Format: "safetensors", File: "model.safetensors", Original: st,
		Rewritten: replaceOnce(st, `"dtype":"F32"`, `"dtype":"I32"`)})

	l, err = gguf.Plan(ts, gguf.PlanOptions{KVs: []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("llama")},
		{Key: "general.name", Value: gguf.StringValue("safe")},
	}})
	if err != nil {
		return nil, err
	}
	gg, err := materialize(l, data)
	if err != nil {
		return nil, err
	}
	out = append(out, Rewrite{Format: "gguf", File: "model.gguf", Original: gg, Rewritten: replaceOnce(gg, "safe", "evil")})

	l, err = pytorch.Plan(ts, pytorch.PlanOptions{})
	if err != nil {
		return nil, err
	}
	pt, err := materialize(l, data)
	if err != nil {
		return nil, err
	}
	evil, err := swapPickle(pt, cmd)
	if err != nil {
		return nil, err
	}
	out = append(out, Rewrite{Format: "pytorch", File: l.Files[0].Path, Original: pt, Rewritten: evil})
	for _, r := range out {
		if len(r.Rewritten) != len(r.Original) || bytes.Equal(r.Rewritten, r.Original) {
			return nil, fmt.Errorf("testmodel: the %s rewrite is not a same-size change", r.Format)
		}
	}
	return out, nil
}

func materialize(l *formats.Layout, data [][]byte) ([]byte, error) {
	files, err := formattest.Materialize(l, data)
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		return nil, fmt.Errorf("testmodel: %d files planned, want 1", len(files))
	}
	return files[l.Files[0].Path], nil
}

// replaceOnce replaces the first old in b by new (of the same length).
func replaceOnce(b []byte, old, new string) []byte {
	return bytes.Replace(bytes.Clone(b), []byte(old), []byte(new), 1)
}

// swapPickle replaces the data.pkl of a torch.save zip by a pickle of the
// same length that calls posix.system(cmd), and puts its CRC-32 wherever
// the old one was (local header, data descriptor, central directory).
func swapPickle(ckpt []byte, cmd string) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(ckpt), int64(len(ckpt)))
	if err != nil {
		return nil, err
	}
	var pkl []byte
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/data.pkl") {
			rc, err := f.Open()
			if err != nil {
				return nil, err
			}
			pkl, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	head := "\x80\x02cposix\nsystem\nX"
	pad := len(pkl) - len(head) - 4 - len(cmd) - len("\x85R.")
	if pkl == nil || pad < 0 {
		return nil, fmt.Errorf("testmodel: data.pkl of %d bytes cannot hold a call of %q", len(pkl), cmd)
	}
	arg := cmd + strings.Repeat(" ", pad) // the shell ignores trailing spaces
	evil := binary.LittleEndian.AppendUint32([]byte(head), uint32(len(arg)))
	evil = append(append(evil, arg...), "\x85R."...)
	if bytes.Count(ckpt, pkl) != 1 {
		return nil, fmt.Errorf("testmodel: data.pkl is not found exactly once in the checkpoint")
	}
	out := bytes.Replace(ckpt, pkl, evil, 1)
	oldCRC := binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(pkl))
	newCRC := binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(evil))
	if n := bytes.Count(out, oldCRC); n < 2 || n > 3 {
		return nil, fmt.Errorf("testmodel: the CRC-32 of data.pkl is found %d times in the checkpoint", n)
	}
	return bytes.ReplaceAll(out, oldCRC, newCRC), nil
}
