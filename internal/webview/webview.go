package webview

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/gc"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/store"
)

// PageSize is how many tensors, diff entries, files or history entries one
// page lists.
const PageSize = 200

// maxParam bounds a query parameter (a version name is far shorter).
const maxParam = 1024

// New returns the web view of st.
func New(st *store.Store) http.Handler {
	v := &view{st: st}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.page("index", v.index))
	mux.HandleFunc("GET /ref", v.page("ref", v.ref))
	mux.HandleFunc("GET /version", v.page("version", v.version))
	mux.HandleFunc("GET /diff", v.page("diff", v.diff))
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		v.fail(w, errs.New(errs.NotFound, "web", "no page %s; start at /", r.URL.Path))
	})
	return mux
}

type view struct{ st *store.Store }

// page renders the template name with what load returns, or an error page.
func (v *view) page(name string, load func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := load(r)
		if err != nil {
			v.fail(w, err)
			return
		}
		v.render(w, http.StatusOK, name, data)
	}
}

func (v *view) render(w http.ResponseWriter, status int, name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// No script, no outside fetch, no framing: a name that slipped past
	// the escaping could still do nothing.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Pages are bounded (PageSize), so each is made whole before it is
	// sent: a template that fails gives a 500, not half a page.
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "<!doctype html><p>rendering the page failed: %s</p>", htmlEscape(err.Error()))
		return
	}
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail shows err with its class, and the HTTP status the class means.
func (v *view) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch errs.ClassOf(err) {
	case errs.NotFound:
		status = http.StatusNotFound
	case errs.SchemaError, errs.SizeLimitExceeded:
		status = http.StatusBadRequest
	case errs.Conflict: // the store's lock, held by a gc: try again
		status = http.StatusServiceUnavailable
	}
	class := "io_error"
	if c := errs.ClassOf(err); c != 0 {
		class = c.Key()
	}
	v.render(w, status, "error", map[string]string{"Class": class, "Message": err.Error()})
}

// param is the query parameter key, which must be there and be short.
func param(r *http.Request, key string) (string, error) {
	s := r.URL.Query().Get(key)
	switch {
	case s == "":
		return "", errs.New(errs.SchemaError, "web", "the page needs ?%s=", key)
	case len(s) > maxParam:
		return "", errs.New(errs.SizeLimitExceeded, "web", "?%s= is %d bytes (at most %d)", key, len(s), maxParam)
	}
	return s, nil
}

// pager is one page of a list of n entries.
type pager struct {
	Page, Pages, From, To, Total int
	Prev, Next                   string // links to the neighbours, "" at the ends
}

// pageOf reads ?page= (from 1) for a list of n entries; base is the page's
// own URL, to which &page=N is added.
func pageOf(r *http.Request, n int, base string) (pager, error) {
	p := pager{Page: 1, Pages: max(1, (n+PageSize-1)/PageSize), Total: n}
	if s := r.URL.Query().Get("page"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > p.Pages {
			return p, errs.New(errs.NotFound, "web", "no page %q: there are %d", s, p.Pages)
		}
		p.Page = k
	}
	p.From, p.To = (p.Page-1)*PageSize, min(p.Page*PageSize, n)
	if p.Page > 1 {
		p.Prev = base + "&page=" + strconv.Itoa(p.Page-1)
	}
	if p.Page < p.Pages {
		p.Next = base + "&page=" + strconv.Itoa(p.Page+1)
	}
	return p, nil
}

type indexData struct {
	Refs  []names.Listing
	Tags  []tagRow
	Usage store.Usage
	Dedup float64
}

type tagRow struct {
	Name, Tag string
	Digest    objects.Digest
}

func (v *view) index(*http.Request) (any, error) {
	list, err := names.List(v.st)
	if err != nil {
		return nil, err
	}
	tags, err := names.Tags(v.st, "")
	if err != nil {
		return nil, err
	}
	u, err := v.st.Usage()
	if err != nil {
		return nil, err
	}
	d := indexData{Refs: list, Usage: u, Dedup: u.DedupRatio()}
	for _, t := range tags {
		d.Tags = append(d.Tags, tagRow{Name: t.Name, Tag: t.Tag, Digest: t.Digest})
	}
	return d, nil
}

type historyRow struct {
	Back    int
	Digest  objects.Digest
	Size    int64
	Tags    []string
	Time    time.Time
	Message string
	Older   bool // an older entry follows (NAME~Back+1), to diff with
}

type refData struct {
	Name    string
	History []historyRow
	Pager   pager
}

func (v *view) ref(r *http.Request) (any, error) {
	name, err := param(r, "name")
	if err != nil {
		return nil, err
	}
	hist, err := names.History(v.st, name)
	if err != nil {
		return nil, err
	}
	p, err := pageOf(r, len(hist), "/ref?name="+queryEscape(name))
	if err != nil {
		return nil, err
	}
	tags, err := names.Tags(v.st, name)
	if err != nil {
		return nil, err
	}
	tagsAt := map[objects.Digest][]string{}
	for _, t := range tags {
		tagsAt[t.Digest] = append(tagsAt[t.Digest], t.Tag)
	}
	shown := hist[p.From:p.To]
	ds := make([]objects.Digest, len(shown))
	for i, e := range shown {
		ds[i] = e.Digest
	}
	sizes, err := names.LogicalSizes(v.st, ds)
	if err != nil {
		return nil, err
	}
	d := refData{Name: name, Pager: p}
	for i, e := range shown {
		d.History = append(d.History, historyRow{Back: p.From + i, Digest: e.Digest, Size: sizes[e.Digest], Tags: tagsAt[e.Digest], Time: e.Time, Message: e.Message, Older: p.From+i+1 < len(hist)})
	}
	return d, nil
}

type versionData struct {
	Spec     string
	Digest   objects.Digest
	Manifest *objects.Manifest
	Files    []objects.File
	Tensors  []objects.Tensor
	Pager    pager
	Usage    *gc.VersionUsage
}

func (v *view) version(r *http.Request) (any, error) {
	spec, err := param(r, "v")
	if err != nil {
		return nil, err
	}
	d, m, err := names.Load(v.st, spec)
	if err != nil {
		return nil, err
	}
	p, err := pageOf(r, len(m.Tensors), "/version?v="+queryEscape(spec))
	if err != nil {
		return nil, err
	}
	u, err := gc.UsageOf(r.Context(), v.st, d, m, gc.Options{})
	if err != nil {
		return nil, err
	}
	files := m.Files[:min(len(m.Files), PageSize)]
	return versionData{Spec: spec, Digest: d, Manifest: m, Files: files, Tensors: m.Tensors[p.From:p.To], Pager: p, Usage: u}, nil
}

type diffData struct {
	From, To     string
	FromD, ToD   objects.Digest
	Counts       []countRow
	Tensors      []objects.TensorDiff
	Pager        pager
	Same         bool
	ChangedFiles []objects.FileDiff
}

// countRow is one line of a diff's totals.
type countRow struct {
	Change objects.Change
	Label  string
	Count  int
	Bytes  int64
}

func (v *view) diff(r *http.Request) (any, error) {
	from, err := param(r, "from")
	if err != nil {
		return nil, err
	}
	to, err := param(r, "to")
	if err != nil {
		return nil, err
	}
	da, a, err := names.Load(v.st, from)
	if err != nil {
		return nil, err
	}
	db, b, err := names.Load(v.st, to)
	if err != nil {
		return nil, err
	}
	d := objects.Compare(a, b)
	// Unchanged entries are counted, not listed: the page is what changed.
	var changed []objects.TensorDiff
	for _, t := range d.Tensors {
		if t.Change != objects.Unchanged {
			changed = append(changed, t)
		}
	}
	var files []objects.FileDiff
	for _, f := range d.Files {
		if f.Change != objects.Unchanged && len(files) < PageSize {
			files = append(files, f)
		}
	}
	p, err := pageOf(r, len(changed), "/diff?from="+queryEscape(from)+"&to="+queryEscape(to))
	if err != nil {
		return nil, err
	}
	var counts []countRow
	for _, c := range []objects.Change{objects.Added, objects.Removed, objects.Changed, objects.Renamed, objects.Unchanged} {
		label := string(c)
		if c == objects.Renamed {
			label = "renamed, same bytes"
		}
		counts = append(counts, countRow{Change: c, Label: label, Count: d.Count[c], Bytes: d.Bytes[c]})
	}
	return diffData{From: from, To: to, FromD: da, ToD: db, Counts: counts, Tensors: changed[p.From:p.To], Pager: p, Same: da == db, ChangedFiles: files}, nil
}
