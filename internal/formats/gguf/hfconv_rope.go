package gguf

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"

	"github.com/mstore/mstore/internal/errs"
)

// RopeFreqsTensor is the tensor llama.cpp's converter generates for llama3
// rope scaling (gguf-py MODEL_TENSOR.ROPE_FREQS).
const RopeFreqsTensor = "rope_freqs.weight"

// ropeScaling is config.json's rope_scaling as the converter reads it.
type ropeScaling struct {
	Type     string      `json:"type"`
	RopeType string      `json:"rope_type"`
	Factor   json.Number `json:"factor"`
	Low      json.Number `json:"low_freq_factor"`
	High     json.Number `json:"high_freq_factor"`
	Orig     json.Number `json:"original_max_position_embeddings"`
}

// num is n as a float64, or def when n is absent.
func num(n json.Number, def float64) float64 {
	if v, err := strconv.ParseFloat(n.String(), 64); err == nil {
		return v
	}
	return def
}

// llama3RopeFreqs is LlamaModel.generate_extra_tensors of
// convert_hf_to_gguf.py: one factor per rotary frequency pair, 1 for high
// frequencies, factor for low ones and a smooth blend between, which
// llama.cpp multiplies its rotary wavelengths by. As the converter does,
// the original context length is config.json's top-level
// original_max_position_embeddings (8192 when absent), and the arithmetic
// is torch's float32 where the converter's is.
func llama3RopeFreqs(c *config, rs ropeScaling, hp hparams) ([]float32, error) {
	base := 10000.0
	if v, ok, err := c.f32("rope_theta"); err != nil {
		return nil, err
	} else if ok {
		base = float64(v)
	}
	dim := hp.hidden / hp.heads
	if v, ok, err := c.u32("head_dim"); err != nil {
		return nil, err
	} else if ok && v > 0 {
		dim = v
	}
	orig := 8192.0
	if v, ok, err := c.u32("original_max_position_embeddings"); err != nil {
		return nil, err
	} else if ok {
		orig = float64(v)
	}
	factor, low, high := num(rs.Factor, 8), num(rs.Low, 1), num(rs.High, 4)
	lowWavelen, highWavelen := orig/low, orig/high
	if dim < 2 || dim > 1<<16 || lowWavelen == highWavelen || factor == 0 {
		return nil, errs.New(errs.SchemaError, "hfconv", "config.json rope_scaling llama3: head dimension %d, factor %g, low_freq_factor %g, high_freq_factor %g give no rope_freqs", dim, factor, low, high)
	}
	out := make([]float32, 0, dim/2)
	for i := uint32(0); i < dim; i += 2 {
		exp := float32(i) / float32(dim)
		freq := float32(1) / float32(math.Pow(base, float64(exp)))
		wavelen := float32(2*math.Pi) / freq
		switch {
		case float64(wavelen) < highWavelen:
			out = append(out, 1)
		case float64(wavelen) > lowWavelen:
			out = append(out, float32(factor))
		default:
			smooth := (float32(orig)/wavelen - float32(low)) / float32(high-low)
			out = append(out, 1/((1-smooth)/float32(factor)+smooth))
		}
	}
	return out, nil
}

// f32Bytes is v as little-endian F32 data.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// RopeFreqs is the rope_freqs.weight data (F32) the model's llama3 rope
// scaling needs, or nil.
func (c *ToGGUF) RopeFreqs() []byte {
	if c.ropeFreqs == nil {
		return nil
	}
	return f32Bytes(c.ropeFreqs)
}
