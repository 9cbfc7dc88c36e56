package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/testenv"
)

// ollamaVersion is the ollama .ci/run builds into its cache folder.
const ollamaVersion = "v0.17.4"

// ollamaBinary finds ollama: $MSTORE_OLLAMA, else the cache folder .ci/run
// builds it into.
func ollamaBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("MSTORE_OLLAMA")
	if p == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			h, _ := os.UserHomeDir()
			cache = filepath.Join(h, ".cache")
		}
		p = filepath.Join(cache, "mstore-ci", "ollama-"+ollamaVersion, "ollama")
	}
	if _, err := os.Stat(p); err != nil {
		testenv.Missing(t, "no ollama at %s (.ci/run builds ollama %s there; or set MSTORE_OLLAMA)", p, ollamaVersion)
	}
	return p
}

// ollamaServer is a running `ollama serve` over one models folder.
type ollamaServer struct {
	t      *testing.T
	bin    string
	url    string
	models string
	env    []string
	mu     sync.Mutex
	log    bytes.Buffer
}

// serveOllama starts `ollama serve` with models as its models folder, on a
// loopback port of its choosing, with a home of its own; it is stopped
// (with the runners it started) when the test ends.
func serveOllama(t *testing.T, models string) *ollamaServer {
	t.Helper()
	s := &ollamaServer{t: t, bin: ollamaBinary(t), models: models}
	home := t.TempDir()
	s.env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OLLAMA_MODELS=" + models,
		"OLLAMA_HOST=127.0.0.1:0", "OLLAMA_NO_CLOUD=1", "OLLAMA_NUM_PARALLEL=1", "OLLAMA_KEEP_ALIVE=-1",
		// No network but loopback (which Go never proxies): anything
		// else goes to a proxy that is not there.
		"HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1", "GIN_MODE=release"}
	cmd := exec.Command(s.bin, "serve")
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its runners stop with it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("ollama serve's log:\n%s", s.logText())
		}
	})
	addr := make(chan string, 1)
	listening := regexp.MustCompile(`Listening on (127\.0\.0\.1:[0-9]+)`)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select { // the first one; reading goes on, or ollama would block
				case addr <- m[1]:
				default:
				}
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("ollama serve ended before listening:\n%s", s.logText())
		}
		s.url = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("ollama serve does not listen after 30 s:\n%s", s.logText())
	}
	s.env[3] = "OLLAMA_HOST=" + strings.TrimPrefix(s.url, "http://")
	return s
}

func (s *ollamaServer) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// call sends req (nil: a GET) to the API path and decodes the answer,
// which must be 200, into v.
func (s *ollamaServer) call(path string, req, v any) {
	s.t.Helper()
	method, body := http.MethodGet, io.Reader(nil)
	if req != nil {
		b, _ := json.Marshal(req)
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	r, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(r)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		s.t.Fatalf("%s %s: %s %v\n%s", method, path, resp.Status, err, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		s.t.Fatalf("%s %s answers %q: %v", method, path, b, err)
	}
}

// ollamaTag is one model of /api/tags.
type ollamaTag struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Digest  string `json:"digest"`
	Details ollamaDetails
}

type ollamaDetails struct {
	Format            string `json:"format"`
	Family            string `json:"family"`
	ParameterSize     string `json:"parameter_size"`
	QuantizationLevel string `json:"quantization_level"`
}

// ollamaShow is /api/show's answer, less what changes with the file times
// (modified_at).
type ollamaShow struct {
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	System       string         `json:"system"`
	License      string         `json:"license"`
	Details      ollamaDetails  `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
}

func (s *ollamaServer) tags() map[string]ollamaTag {
	s.t.Helper()
	var list struct{ Models []ollamaTag }
	s.call("/api/tags", nil, &list)
	out := map[string]ollamaTag{}
	for _, m := range list.Models {
		out[m.Name] = m
	}
	return out
}

func (s *ollamaServer) show(name string) ollamaShow {
	s.t.Helper()
	var sh ollamaShow
	s.call("/api/show", map[string]any{"model": name}, &sh)
	// Its Modelfile says FROM the model blob's path: the same blob in
	// another folder is the same model.
	sh.Modelfile = strings.ReplaceAll(sh.Modelfile, s.models+string(filepath.Separator), "MODELS/")
	// ollama lists the parameters in map order: compare them as sets.
	sh.Modelfile, sh.Parameters = sortedLines(sh.Modelfile), sortedLines(sh.Parameters)
	return sh
}

// generate is a few greedy tokens of name on a fixed prompt.
func (s *ollamaServer) generate(name string) (text string, tokens int) {
	s.t.Helper()
	var g struct {
		Response  string `json:"response"`
		Done      bool   `json:"done"`
		EvalCount int    `json:"eval_count"`
	}
	s.call("/api/generate", map[string]any{"model": name, "prompt": "Once upon a time", "raw": true, "stream": false,
		"options": map[string]any{"num_predict": 4, "temperature": 0, "seed": 1, "num_ctx": 128}}, &g)
	if !g.Done {
		s.t.Fatalf("generate with %s did not finish: %+v", name, g)
	}
	return g.Response, g.EvalCount
}

// manifestOf is the size /api/tags gives a manifest (its layers and
// config) and its digest (of the manifest file's bytes).
func manifestOf(t *testing.T, path string) (size int64, digest string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Config ollamaLayer   `json:"config"`
		Layers []ollamaLayer `json:"layers"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, l := range append(m.Layers, m.Config) {
		size += l.Size
	}
	sum := sha256.Sum256(b)
	return size, hex.EncodeToString(sum[:])
}

// requireServed fails unless ollama lists name with the size and digest of
// its manifest in models.
func requireServed(t *testing.T, s *ollamaServer, models, name, manifestRel string) ollamaTag {
	t.Helper()
	size, digest := manifestOf(t, filepath.Join(models, "manifests", filepath.FromSlash(manifestRel)))
	tag, ok := s.tags()[name]
	if !ok || tag.Size != size || tag.Digest != digest {
		t.Fatalf("/api/tags gives %s as %+v (listed: %v), want size %d, digest %s", name, tag, ok, size, digest)
	}
	return tag
}

// TestOllamaServesCheckout: the real ollama serves what checkout --layout
// ollama writes as its models folder. A model added from an ollama models
// folder (GGUF, template, params, system, licenses) is listed by
// /api/tags with its manifest's size and digest, /api/show gives its
// template, parameters, system prompt, licenses and details, the same as
// ollama says of the original folder, and it generates the same tokens
// from both; a plain GGUF checked out in the layout is served and
// generates too. ollama's start-up prune, which deletes blobs no manifest
// names, leaves every file the checkout wrote.
func TestOllamaServesCheckout(t *testing.T) {
	t.Parallel()
	ggufPath := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	gguf, err := os.ReadFile(ggufPath)
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(t.TempDir(), "orig")
	ollamaModel(t, orig, "tiny", "1m", gguf, "Be brief.")
	c := newCLI(t)
	c.add(orig)
	c.add(ggufPath, "--name", "acme/plain", "--tag", "q")
	dir := filepath.Join(t.TempDir(), "models")
	c.ok("checkout", "--layout", "ollama", "tiny:1m", dir)
	c.ok("checkout", "--layout", "ollama", "acme/plain:q", dir)
	written := listFiles(t, dir)

	want := serveOllama(t, orig)
	s := serveOllama(t, dir)
	if got := listFiles(t, dir); !equalStrings(got, written) {
		t.Errorf("ollama's start-up changed the models folder: %v", diffStrings(written, got))
	}
	tag := requireServed(t, s, dir, "tiny:1m", "registry.ollama.ai/library/tiny/1m")
	if d := (ollamaDetails{"gguf", "llama", "1M", "F32"}); tag.Details != d {
		t.Errorf("/api/tags gives tiny:1m the details %+v, want %+v", tag.Details, d)
	}
	requireServed(t, s, dir, "acme/plain:q", "registry.ollama.ai/acme/plain/q")

	sh := s.show("tiny:1m")
	if sh.Template != "{{ .System }} {{ .Prompt }}" || sh.System != "Be brief." || !strings.Contains(sh.Parameters, `"</s>"`) ||
		sh.License != "MIT License\nLlama 2 Community License" || sh.ModelInfo["general.architecture"] != "llama" {
		t.Errorf("/api/show tiny:1m: %+v", sh)
	}
	if w := want.show("tiny:1m"); fmt.Sprint(w) != fmt.Sprint(sh) {
		t.Errorf("/api/show tiny:1m of the checkout:\n%+v\nof the original folder:\n%+v", sh, w)
	}
	text, n := s.generate("tiny:1m")
	wantText, wantN := want.generate("tiny:1m")
	if n == 0 || text != wantText || n != wantN {
		t.Errorf("generate: %d tokens %q from the checkout, %d tokens %q from the original", n, text, wantN, wantText)
	}
	if pt, pn := s.generate("acme/plain:q"); pn == 0 || pt != text {
		t.Errorf("generate with the plain GGUF: %d tokens %q, want %q (the same weights, raw prompt)", pn, pt, text)
	}
}

// TestOllamaCreateAddedBack: a model ollama itself writes (`ollama create`
// from a Modelfile FROM the tiny GGUF, offline) is added by mstore from
// the models folder, checked out --layout ollama into another, and served
// from there as ollama served the original: the same files, the same
// /api/tags size and digest, the same /api/show. The same GGUF added as a
// plain file and checked out in the layout has the details ollama create
// gives it.
func TestOllamaCreateAddedBack(t *testing.T) {
	t.Parallel()
	ggufPath := filepath.Join(sharedTestdata(t, "gguf"), "llama-2-tiny-random.gguf")
	made := filepath.Join(t.TempDir(), "made")
	o := serveOllama(t, made)
	modelfile := writeFile(t, filepath.Join(t.TempDir(), "Modelfile"), []byte("FROM "+ggufPath+"\n"+
		"TEMPLATE \"\"\"{{ if .System }}<<SYS>>{{ .System }}<</SYS>>{{ end }}{{ .Prompt }}\"\"\"\n"+
		"SYSTEM \"\"\"Answer in one word.\"\"\"\nPARAMETER temperature 0\nPARAMETER stop \"</s>\"\nLICENSE \"\"\"MIT\"\"\"\n"))
	create := exec.Command(o.bin, "create", "acme/made:v1", "-f", modelfile)
	create.Env = o.env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s", err, out)
	}
	manifest := "registry.ollama.ai/acme/made/v1"
	before := requireServed(t, o, made, "acme/made:v1", manifest)
	shown := o.show("acme/made:v1")

	c := newCLI(t)
	if r := c.add(made); r.Name != "acme/made" || r.Tag != "v1" || r.Format != "gguf" {
		t.Fatalf("add of ollama's models folder: %+v", r)
	}
	back := filepath.Join(t.TempDir(), "back")
	c.ok("checkout", "--layout", "ollama", "acme/made:v1", back)
	requireSameTree(t, made, back)
	// The same GGUF added plain and checked out in the layout gets the
	// details ollama create gives it (family, parameter size, file type).
	c.add(ggufPath, "--name", "acme/plain", "--tag", "q")
	c.ok("checkout", "--layout", "ollama", "acme/plain:q", back)
	s := serveOllama(t, back)
	if after := requireServed(t, s, back, "acme/made:v1", manifest); after != before {
		t.Errorf("/api/tags: %+v after the round trip, %+v before", after, before)
	}
	if sh := s.show("acme/made:v1"); fmt.Sprint(sh) != fmt.Sprint(shown) {
		t.Errorf("/api/show after the round trip:\n%+v\nbefore:\n%+v", sh, shown)
	}
	if plain := requireServed(t, s, back, "acme/plain:q", "registry.ollama.ai/acme/plain/q"); plain.Details != before.Details {
		t.Errorf("/api/tags gives the plain GGUF the details %+v, ollama create %+v", plain.Details, before.Details)
	}
	if sh := s.show("acme/plain:q"); sh.Details != shown.Details {
		t.Errorf("/api/show gives the plain GGUF the details %+v, ollama create %+v", sh.Details, shown.Details)
	}
}

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	sort.Strings(l)
	return strings.Join(l, "\n")
}
