package gguf

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/errs"
)

// Token types of llama.cpp (llama_token_type), which are also
// SentencePiece's ModelProto.SentencePiece.Type numbers.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// piece is one SentencePiece vocabulary entry.
type piece struct {
	text  string
	score float32
	typ   int32
}

// Field numbers of sentencepiece_model.proto.
const (
	fieldPieces     = 1 // ModelProto.pieces
	fieldTrainer    = 2 // ModelProto.trainer_spec
	fieldNormalizer = 3 // ModelProto.normalizer_spec
	fieldPiece      = 1 // SentencePiece.piece
	fieldScore      = 2 // SentencePiece.score
	fieldType       = 3 // SentencePiece.type
)

// maxPieces bounds a tokenizer.model's vocabulary (the largest real ones
// have ~256k pieces).
const maxPieces = 1 << 22

// parseSPM reads the pieces of a tokenizer.model; other fields are skipped.
func parseSPM(b []byte) ([]piece, error) {
	var out []piece
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, spmError(protowire.ParseError(n))
		}
		b = b[n:]
		if num == fieldPieces && typ == protowire.BytesType {
			msg, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, spmError(protowire.ParseError(n))
			}
			b = b[n:]
			p, err := parsePiece(msg)
			if err != nil {
				return nil, err
			}
			if len(out) == maxPieces {
				return nil, errs.New(errs.SizeLimitExceeded, "hfconv", "tokenizer.model has more than %d pieces", maxPieces)
			}
			out = append(out, p)
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, spmError(protowire.ParseError(n))
		}
		b = b[n:]
	}
	if len(out) == 0 {
		return nil, errs.New(errs.SchemaError, "hfconv", "tokenizer.model has no pieces")
	}
	return out, nil
}

func parsePiece(b []byte) (piece, error) {
	p := piece{typ: typeNormal}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, spmError(protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == fieldPiece && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p, spmError(protowire.ParseError(n))
			}
			p.text, b = string(s), b[n:]
		case num == fieldScore && typ == protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return p, spmError(protowire.ParseError(n))
			}
			p.score, b = math.Float32frombits(v), b[n:]
		case num == fieldType && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p, spmError(protowire.ParseError(n))
			}
			if v < typeNormal || v > typeByte {
				return p, errs.New(errs.SchemaError, "hfconv", "tokenizer.model: piece %q has type %d, not 1…6", p.text, v)
			}
			p.typ, b = int32(v), b[n:]
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return p, spmError(protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return p, nil
}

func spmError(err error) error {
	return errs.Wrap(errs.SchemaError, "hfconv", err, "tokenizer.model is not a SentencePiece model protobuf")
}

// writeSPM makes a tokenizer.model of llama's kind (a BPE model with byte
// fallback, the normalizer adding a dummy prefix and escaping spaces as
// ▁) from pieces. unk, bos, eos are the ids of those tokens (-1: none).
func writeSPM(pieces []piece, unk, bos, eos int) []byte {
	var b []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, fieldPiece, protowire.BytesType)
		m = protowire.AppendString(m, p.text)
		m = protowire.AppendTag(m, fieldScore, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		if p.typ != typeNormal {
			m = protowire.AppendTag(m, fieldType, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(p.typ))
		}
		b = protowire.AppendTag(b, fieldPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	// TrainerSpec: model_type (3) BPE = 2, vocab_size (4), byte_fallback
	// (35), unk_id (40), bos_id (41), eos_id (42), pad_id (43) = -1.
	var t []byte
	t = protowire.AppendTag(t, 3, protowire.VarintType)
	t = protowire.AppendVarint(t, 2)
	t = protowire.AppendTag(t, 4, protowire.VarintType)
	t = protowire.AppendVarint(t, uint64(len(pieces)))
	t = protowire.AppendTag(t, 35, protowire.VarintType)
	t = protowire.AppendVarint(t, 1)
	for i, id := range []int{unk, bos, eos, -1} {
		t = protowire.AppendTag(t, protowire.Number(40+i), protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(int64(id)))
	}
	b = protowire.AppendTag(b, fieldTrainer, protowire.BytesType)
	b = protowire.AppendBytes(b, t)
	// NormalizerSpec: name (1) "identity", add_dummy_prefix (3),
	// remove_extra_whitespaces (4) false, escape_whitespaces (5).
	var n []byte
	n = protowire.AppendTag(n, 1, protowire.BytesType)
	n = protowire.AppendString(n, "identity")
	for _, f := range [][2]uint64{{3, 1}, {4, 0}, {5, 1}} {
		n = protowire.AppendTag(n, protowire.Number(f[0]), protowire.VarintType)
		n = protowire.AppendVarint(n, f[1])
	}
	b = protowire.AppendTag(b, fieldNormalizer, protowire.BytesType)
	return protowire.AppendBytes(b, n)
}

// padToken is the name the converter gives a token id with no token.
func padToken(i int) string { return fmt.Sprintf("[PAD%d]", i) }
