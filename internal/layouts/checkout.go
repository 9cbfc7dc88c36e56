package layouts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/restorer"
	"github.com/mstore/mstore/internal/store"
)

// CheckoutResult is what a checkout into a layout did.
type CheckoutResult struct {
	*layout.Written
	Checkout *restorer.Result `json:"checkout"`
}

// Checkout writes version ref of st into the layout l rooted at dest (a
// hub folder, a models folder), which may hold other models already: the
// restorer checks the version out, verified, into a temporary folder
// inside dest, and the layout moves its files into place from there.
func Checkout(ctx context.Context, st *store.Store, l layout.FileLayout, ref, dest string, opts restorer.Options) (*CheckoutResult, error) {
	d, m, err := names.Load(st, ref)
	if err != nil {
		return nil, err
	}
	model := layout.Model{Digest: d, Manifest: m}
	if spec, err := refs.ParseSpec(ref); err == nil && spec.Kind != refs.KindDigest {
		model.Name, model.Tag = spec.Name, spec.Tag
	}
	if dest, err = filepath.Abs(dest); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	// A held temp folder: a checkout killed midway leaves it for the next
	// checkout into dest to remove.
	tmp, err := restorer.NewTempDir(dest, "layout")
	if err != nil {
		return nil, err
	}
	defer tmp.Close()
	model.Dir = filepath.Join(tmp.Path(), "model")
	ropts := opts
	ropts.Force = false     // the temporary folder is new; Force is the layout's
	ropts.Unrecorded = true // and gone once the layout took its files
	res, err := restorer.Checkout(ctx, st, d, model.Dir, ropts)
	if err != nil {
		return nil, err
	}
	w, err := l.Write(model, dest, layout.WriteOptions{Force: opts.Force})
	if err != nil {
		return nil, err
	}
	return &CheckoutResult{Written: w, Checkout: res}, nil
}
