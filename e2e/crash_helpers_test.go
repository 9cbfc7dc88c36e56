package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mstore/mstore/internal/objects"
	"github.com/mstore/mstore/internal/refs"
	"github.com/mstore/mstore/internal/store"
)

// proc is an mstore process started in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// start starts `mstore --store STORE args...` with extra environment env.
func (c *cli) start(env []string, args ...string) *proc {
	c.t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(c.exe(), append([]string{"--store", c.store}, args...)...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start mstore: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// outcome is how a process ended.
type outcome struct {
	code   int            // exit status when it exited
	signal syscall.Signal // the signal that killed it, or 0
}

func (o outcome) String() string {
	if o.signal != 0 {
		return "killed"
	}
	return fmt.Sprintf("exit %d", o.code)
}

// wait waits (at most a minute) for the process to end.
func (p *proc) wait(t *testing.T) outcome {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("mstore %v ran for a minute\nstderr: %s", p.cmd.Args, p.stderr.String())
	}
	requireNoRace(t, p.stderr.String())
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return outcome{}
	case errors.As(p.err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return outcome{signal: ws.Signal()}
		}
		return outcome{code: exit.ExitCode()}
	}
	t.Fatalf("waiting for mstore: %v", p.err)
	return outcome{}
}

// kill sends SIGKILL (a no-op once the process has ended) and waits.
func (p *proc) kill(t *testing.T) outcome {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	return p.wait(t)
}

// waitStopped waits until the process has stopped itself (a failpoint with
// :stop) and fails the test if it ends or does not stop within 30 s.
func (p *proc) waitStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("mstore ended instead of stopping at its failpoint: %v\nstderr: %s", p.err, p.stderr.String())
		default:
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err == nil {
			// pid (comm) state ...: the state follows the last ')'.
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("mstore did not stop at its failpoint within 30 s")
}

// fsckReport is `fsck --json`.
type fsckReport struct {
	OK           bool            `json:"ok"`
	Blobs        int             `json:"blobs"`
	Missing      []store.Finding `json:"missing"`
	Corrupt      []store.Finding `json:"corrupt"`
	Unreferenced []store.Finding `json:"unreferenced"`
	Leftovers    []store.Finding `json:"leftovers"`
	Repaired     []store.Finding `json:"repaired"`
}

// fsck runs `fsck --json` (and args), which must exit 0 and find nothing
// missing or corrupt; it also checks that every blob file under its final
// name holds the bytes its name says, recorded or not.
func (c *cli) fsck(args ...string) fsckReport {
	c.t.Helper()
	r := c.run(append([]string{"--json", "fsck"}, args...)...)
	var rep fsckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		c.t.Fatalf("fsck printed no report: %v\n%s", err, r)
	}
	if r.code != 0 || !rep.OK {
		c.t.Fatalf("fsck is not clean: missing %+v\ncorrupt %+v\n%s", rep.Missing, rep.Corrupt, r)
	}
	for _, l := range rep.Leftovers {
		if strings.Contains(l.Detail, "hash") {
			c.t.Fatalf("a blob file under its final name does not hold its bytes: %+v", l)
		}
	}
	return rep
}

// names is what a store's names say: each ref's history (oldest first) and
// each tag.
type names struct {
	history map[string][]objects.Digest
	tags    map[string]objects.Digest // NAME:TAG
}

func (n names) String() string {
	var b strings.Builder
	for name, h := range n.history {
		fmt.Fprintf(&b, "%s:", name)
		for _, d := range h {
			fmt.Fprintf(&b, " %s", d.Short())
		}
		b.WriteString("; ")
	}
	for k, d := range n.tags {
		fmt.Fprintf(&b, "%s=%s; ", k, d.Short())
	}
	return b.String()
}

func (n names) clone() names {
	out := names{history: map[string][]objects.Digest{}, tags: map[string]objects.Digest{}}
	for k, v := range n.history {
		out.history[k] = append([]objects.Digest{}, v...)
	}
	for k, v := range n.tags {
		out.tags[k] = v
	}
	return out
}

func (n names) equal(o names) bool {
	if len(n.history) != len(o.history) || len(n.tags) != len(o.tags) {
		return false
	}
	for k, v := range n.history {
		w, ok := o.history[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	for k, v := range n.tags {
		if w, ok := o.tags[k]; !ok || v != w {
			return false
		}
	}
	return true
}

// readNames reads the refs and tags of the store (no mstore may be
// running). A store not created yet has none.
func (c *cli) readNames() names {
	c.t.Helper()
	n := names{history: map[string][]objects.Digest{}, tags: map[string]objects.Digest{}}
	if _, err := os.Stat(filepath.Join(c.store, "index.db")); errors.Is(err, os.ErrNotExist) {
		return n
	}
	st, err := store.Open(c.store, false, store.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	err = st.View(func(tx *bolt.Tx) error {
		list, err := refs.List(tx)
		if err != nil {
			return err
		}
		for _, r := range list {
			h, err := refs.History(tx, r.Name)
			if err != nil {
				return err
			}
			for i := len(h) - 1; i >= 0; i-- {
				n.history[r.Name] = append(n.history[r.Name], h[i].Digest)
			}
		}
		tags, err := refs.Tags(tx)
		for _, t := range tags {
			n.tags[t.Name+":"+t.Tag] = t.Digest
		}
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// readTree returns the files under dir, path → bytes.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, rel := range listFiles(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = b
	}
	return out
}

func sameTree(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		if y, ok := b[p]; !ok || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// crashModels writes n small models under root that share tensors (model i
// shares half its tensors with model i+1) and each hold one tensor of
// 1.25 MiB (a loose blob) besides small packed ones. It returns their
// directories and files.
func crashModels(t *testing.T, root string, n int) ([]string, []map[string][]byte) {
	t.Helper()
	var dirs []string
	var trees []map[string][]byte
	for i := range n {
		var ts []tensor
		for j := range 6 {
			seed := uint64(1000 + 10*(i+j%2) + j) // even tensors shared with the next model
			ts = append(ts, randTensor(fmt.Sprintf("layers.%d.weight", j), "F32", seed, 32, 32))
		}
		ts = append(ts, randTensor("embed.weight", "U8", uint64(2000+i/2), 1280<<10))
		files := map[string][]byte{
			"model.safetensors": safetensorsFile(ts, nil),
			"config.json":       configJSON("float32"),
		}
		dir := filepath.Join(root, fmt.Sprintf("model%d", i))
		writeFiles(t, dir, files)
		dirs = append(dirs, dir)
		trees = append(trees, files)
	}
	return dirs, trees
}
