package gguf

import "github.com/mstore/mstore/internal/errs"

// Permute is convert_hf_to_gguf.py's LlamaModel.permute on the bytes of a
// row-major tensor with rows rows: within each of heads heads, the rows
// are (2, half) and become (half, 2) —
//
//	w.reshape(heads, 2, rows//heads//2, *rest).swapaxes(1, 2).reshape(w.shape)
//
// so output row h*2*half + 2*i + j is input row h*2*half + j*half + i.
func Permute(src []byte, rows, heads int) ([]byte, error) {
	return permuteRows(src, rows, heads, false)
}

// Unpermute is the inverse of Permute (GGUF → HF).
func Unpermute(src []byte, rows, heads int) ([]byte, error) {
	return permuteRows(src, rows, heads, true)
}

func permuteRows(src []byte, rows, heads int, inverse bool) ([]byte, error) {
	if rows <= 0 || heads <= 0 || rows%(2*heads) != 0 || len(src)%rows != 0 {
		return nil, errs.New(errs.SchemaError, "hfconv", "cannot permute %d bytes of %d rows into %d heads: the rows must be a multiple of 2 × heads (check num_attention_heads / num_key_value_heads in config.json)", len(src), rows, heads)
	}
	rowBytes := len(src) / rows
	half := rows / heads / 2
	out := make([]byte, len(src))
	for h := range heads {
		for j := range 2 {
			for i := range half {
				hfRow := h*2*half + j*half + i
				ggRow := h*2*half + 2*i + j
				from, to := hfRow, ggRow
				if inverse {
					from, to = ggRow, hfRow
				}
				copy(out[to*rowBytes:(to+1)*rowBytes], src[from*rowBytes:(from+1)*rowBytes])
			}
		}
	}
	return out, nil
}
