package restorer

import (
	"testing"

	"github.com/mstore/mstore/internal/codecs"
	"github.com/mstore/mstore/internal/formats"
	"github.com/mstore/mstore/internal/objects"
)

// testPlanner is a codec that a test plans with: name, and a plan function.
type testPlanner struct {
	formats.Codec
	name string
	plan func(req PlanRequest) (*Planned, error)
}

func (p testPlanner) Name() string                                   { return p.name }
func (testPlanner) Honours() []formats.Option                        { return nil }
func (p testPlanner) PlanCheckout(req PlanRequest) (*Planned, error) { return p.plan(req) }

// expanding is a registry codec with a test's Expand beside what it does.
type expanding struct {
	formats.Planner
	expand func(m *objects.Manifest, opts formats.WriteOptions) ([]Expanded, error)
}

func (e expanding) Expand(m *objects.Manifest, opts formats.WriteOptions) ([]Expanded, error) {
	return e.expand(m, opts)
}

// withCodecs makes checkout find the given codecs before the registry's,
// until the test ends.
func withCodecs(t *testing.T, extra ...formats.Codec) {
	t.Helper()
	old := codecByName
	t.Cleanup(func() { codecByName = old })
	codecByName = func(name string) (formats.Codec, bool) {
		for _, c := range extra {
			if c.Name() == name {
				return c, true
			}
		}
		return codecs.ByName(name)
	}
}
