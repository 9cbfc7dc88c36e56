package layouts

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/mstore/mstore/internal/archiver"
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/layouts/layout"
	"github.com/mstore/mstore/internal/progress"
	"github.com/mstore/mstore/internal/store"
)

// AddOptions say how to add what a layout holds.
type AddOptions struct {
	// Name, Tag and Message replace the layout's own for a path that holds
	// one model; for several they are refused (each model has its ref).
	Name, Tag, Message string
	// Only, when set, keeps the models whose NAME or NAME:TAG (the ref
	// and tag they are added as) it is: one model of a models folder or
	// hub, as `ollama run NAME:TAG` names it.
	Only     string
	Progress progress.Reporter
	Limits   formats.Limits
}

// Summary is what an add of a layout did: one entry per version, in the
// order added, and the totals. SavedBytes is what the store did not have
// to write because it held the bytes already (the dedup across
// revisions, models and earlier adds).
type Summary struct {
	Layout       string             `json:"layout"`
	Versions     []*archiver.Result `json:"versions"`
	Failed       []Failure          `json:"failed,omitempty"`
	LogicalBytes int64              `json:"logical_bytes"`
	NewBytes     int64              `json:"new_bytes"`
	SavedBytes   int64              `json:"saved_bytes"`
	NewBlobs     int                `json:"new_blobs"`
}

// Failure is a model of the layout that was not added.
type Failure struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Class string `json:"class"`
	Error string `json:"error"`
}

// Add stores every model the layout l finds at path, each as a version of
// its ref. A model that fails does not stop the others; the error then
// names how many failed and has the class of the first.
func Add(ctx context.Context, st *store.Store, l layout.FileLayout, path string, opts AddOptions) (*Summary, error) {
	srcs, err := l.Sources(path)
	if err != nil {
		return nil, err
	}
	if opts.Only != "" {
		if srcs = only(srcs, opts.Only); len(srcs) == 0 {
			return nil, errs.New(errs.NotFound, "add", "%s holds no model %s (run add without --only to add all)", path, opts.Only)
		}
	}
	if len(srcs) != 1 && (opts.Name != "" || opts.Tag != "" || opts.Message != "") {
		return nil, errs.New(errs.SchemaError, "add", "%s holds %d models; --name, --tag and -m name one (add one snapshot or manifest to use them)", path, len(srcs))
	}
	sum := &Summary{Layout: l.Name()}
	one := oneBar(opts.Progress, srcs)
	var rep progress.Reporter // a nil *bar must not become a non-nil Reporter
	if one != nil {
		rep = one
	}
	var firstErr error
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		aopts := archiver.Options{Name: src.Name, Tag: src.Tag, Message: src.Message, Files: src.Files,
			Meta: src.Meta, Progress: rep, Limits: opts.Limits}
		if opts.Name != "" {
			aopts.Name = opts.Name
		}
		if opts.Tag != "" {
			aopts.Tag = opts.Tag
		}
		if opts.Message != "" {
			aopts.Message = opts.Message
		}
		var res *archiver.Result
		err := src.Err
		if err == nil {
			res, err = archiver.Add(ctx, st, src.Root, aopts)
		}
		if err != nil {
			if len(srcs) == 1 {
				return nil, err
			}
			if firstErr == nil {
				firstErr = err
			}
			sum.Failed = append(sum.Failed, Failure{Name: aopts.Name, Path: src.Root, Class: errs.ClassOf(err).Key(), Error: err.Error()})
			continue
		}
		sum.Versions = append(sum.Versions, res)
		sum.LogicalBytes += res.LogicalBytes
		sum.NewBytes += res.NewBytes
		sum.NewBlobs += res.NewBlobs
	}
	if one != nil {
		one.done()
	}
	sum.SavedBytes = max(0, sum.LogicalBytes-sum.NewBytes)
	if firstErr != nil {
		return sum, fmt.Errorf("add: %d of %d models of %s were not added (the others were): %w", len(sum.Failed), len(srcs), path, firstErr)
	}
	return sum, nil
}

func only(srcs []layout.Source, want string) []layout.Source {
	var out []layout.Source
	for _, s := range srcs {
		if s.Name == want || s.Name+":"+s.Tag == want {
			out = append(out, s)
		}
	}
	return out
}

// bar is one progress display over many adds: started once with the
// total of every model, it ignores each add's own Start and Finish.
type bar struct {
	p     progress.Reporter
	added atomic.Int64
}

func oneBar(p progress.Reporter, srcs []layout.Source) *bar {
	if p == nil {
		return nil
	}
	var total int64
	for _, s := range srcs {
		total += s.Bytes
	}
	p.Start(total)
	return &bar{p: p}
}

func (b *bar) Start(int64) {}
func (b *bar) Finish()     {}
func (b *bar) Add(n int64) { b.added.Add(n); b.p.Add(n) }
func (b *bar) done()       { b.p.Finish() }
