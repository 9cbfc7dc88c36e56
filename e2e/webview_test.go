package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mstore/mstore/internal/testenv"
)

// chromium is Debian's chromium, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// browse runs headless chromium on url with args (--dump-dom,
// --screenshot=…) and returns what it printed on stdout.
func browse(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1100,900"}, append(args, url)...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return stdout.String()
}

// TestWebViewInChromium: `mstore serve` shows a browser the refs, tags,
// a version's tensors and a diff, as the browser's own DOM has them; a
// tensor named like markup is text in that DOM, never an element; the
// diff page renders (a screenshot is made).
func TestWebViewInChromium(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromium); err != nil {
		testenv.Missing(t, "no %s: apt-get install chromium (.ci/run does)", chromium)
	}
	c := newCLI(t)
	ts := smallModel(4)
	ts[0].name = `<script>document.title="pwned"</script>`
	ts[1].name = `<img src=x onerror="document.title='pwned'">`
	dir := filepath.Join(t.TempDir(), "m")
	writeFiles(t, dir, map[string][]byte{"model.safetensors": safetensorsFile(ts, nil)})
	first := c.add(dir, "--name", "acme/web", "--tag", "v1")
	ts[2] = randTensor(ts[2].name, ts[2].dtype, 99, ts[2].shape...)
	writeFiles(t, dir, map[string][]byte{"model.safetensors": safetensorsFile(ts, nil)})
	c.add(dir, "--name", "acme/web")
	s := startServe(t, c.store, "127.0.0.1:0", nil)

	// Each page in its own chromium, at once: a browser's start is mostly
	// waiting.
	for _, page := range []struct {
		name, path string
		want       []string
	}{
		{"refs", "/", []string{"acme/web", "acme/web:v1", first.Digest, "dedup"}},
		{"version", "/version?v=acme/web:v1", []string{first.Digest, "&lt;script&gt;document.title=\"pwned\"&lt;/script&gt;", "&lt;img src=x", ts[3].name, "unique", "shared"}},
		{"diff", "/diff?from=acme/web~1&to=acme/web", []string{ts[2].name, `<tr class="changed"><td>changed</td>`}},
	} {
		t.Run(page.name, func(t *testing.T) {
			t.Parallel()
			dom := browse(t, s.url+page.path, "--dump-dom")
			for _, want := range page.want {
				if !strings.Contains(dom, want) {
					t.Errorf("the browser's DOM of %s lacks %q:\n%s", page.path, want, dom)
				}
			}
			if strings.Contains(dom, "<script") || strings.Contains(dom, "<img") || strings.Contains(dom, "pwned</title>") {
				t.Errorf("a name became markup in the browser:\n%s", dom)
			}
		})
	}
	t.Run("screenshot", func(t *testing.T) {
		t.Parallel()
		shot := filepath.Join(t.TempDir(), "diff.png")
		browse(t, s.url+"/diff?from=acme/web~1&to=acme/web", "--screenshot="+shot)
		if b, err := os.ReadFile(shot); err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("no screenshot of the diff page: %v (%d bytes)", err, len(b))
		}
	})
}
