package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mstore/mstore/internal/errs"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite e2e/testdata/golden from what mstore prints")

// TestErrorMessagesGolden: one refusal of each error class, its message as
// a person reads it and as JSON, against e2e/testdata/golden/CLASS.txt, so
// that a change of wording shows in review (go test ./e2e -run
// TestErrorMessagesGolden -update-golden rewrites them).
func TestErrorMessagesGolden(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	c := &cli{t: t, store: filepath.Join(root, "store")}
	model := smallModelDir(t, filepath.Join(root, "llama-3b"), 11)
	c.add(model, "--name", "llama-3b", "--tag", "v1")

	var ts []tensor
	for i := range 2000 {
		ts = append(ts, randTensor("model.layers."+strconv.Itoa(i)+".weight", "F32", uint64(i), 1))
	}
	many := writeFile(t, filepath.Join(root, "many.safetensors"), safetensorsFile(ts, nil))
	bad := writeFile(t, filepath.Join(root, "bad.safetensors"), rawSafetensors(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 4)))
	h5 := writeFile(t, filepath.Join(root, "model.h5"), append([]byte("\x89HDF\r\n\x1a\n"), randBytes(47, 504)...))
	linked := smallModelDir(t, filepath.Join(root, "linked"), 12)
	os.Symlink(writeFile(t, filepath.Join(root, "secret.json"), []byte("{}")), filepath.Join(linked, "extra.json"))
	other := smallModelDir(t, filepath.Join(root, "other"), 13)
	lost := &cli{t: t, store: filepath.Join(root, "lost")}
	lost.add(model)
	os.Remove(filepath.Join(lost.store, "index.db"))
	srv := startServe(t, c.store, "127.0.0.1:0", nil, "--read-token-file", writeFile(t, filepath.Join(root, "read-token"), []byte("reader\n")))

	cases := map[errs.Class]struct {
		c    *cli
		args []string
	}{
		errs.InvalidArchive:     {c, []string{"add", bad}},
		errs.PathTraversal:      {c, []string{"add", linked}},
		errs.SchemaError:        {c, []string{"add", model, "--name", "a", "--name", "b"}},
		errs.UnsupportedVersion: {c, []string{"add", h5}},
		errs.SizeLimitExceeded:  {c, []string{"add", many, "--max-parse-memory", "64KiB"}},
		errs.NotFound:           {c, []string{"show", "llama3b"}},
		errs.Conflict:           {c, []string{"add", other, "--name", "llama-3b", "--tag", "v1"}},
		errs.IntegrityError:     {lost, []string{"ls"}},
		errs.LossyConversion:    {c, []string{"checkout", "llama-3b", filepath.Join(root, "out"), "--dtype", "f16"}},
		errs.Unauthorized:       {newCLI(t), []string{"pull", srv.url, "llama-3b"}},
	}
	port := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	normal := func(s string) string {
		s = strings.ReplaceAll(s, root, "$TMP")
		return port.ReplaceAllLiteralString(s, "127.0.0.1:$PORT")
	}
	for _, class := range errs.Classes() {
		tc, ok := cases[class]
		if !ok {
			t.Errorf("no golden case for class %s", class.Key())
			continue
		}
		t.Run(class.Key(), func(t *testing.T) {
			run := &cli{t: t, store: tc.c.store}
			run.fail(class.Key(), tc.args...)
			text := run.run(tc.args...).stderr
			asJSON := run.run(append([]string{"--json"}, tc.args...)...).stderr
			got := normal("$ mstore " + strings.Join(tc.args, " ") + "\n" + text + asJSON)
			path := filepath.Join("testdata", "golden", class.Key()+".txt")
			if *updateGolden {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the %s message changed (run with -update-golden if meant):\n--- %s\n%s\n--- now\n%s", class.Key(), path, want, got)
			}
		})
	}
}
