package ocitest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mstore/mstore/internal/testenv"
)

// Registry is a running docker-registry.
type Registry struct {
	Host string // 127.0.0.1:PORT
	// User and Password are the one account of a registry with auth.
	User, Password string
	// Dir is the registry's storage (filesystem driver).
	Dir string
	cmd *exec.Cmd
	log *bytes.Buffer
}

// Options say how to start the registry.
type Options struct {
	// Auth puts it behind htpasswd basic auth, one account.
	Auth bool
	// Token puts it behind distribution's token auth instead: a token
	// service on 127.0.0.1 (WWW-Authenticate: Bearer realm=…) that grants
	// the one account what it asks.
	Token bool
}

// Start starts a registry for the test, or skips the test without it.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		testenv.Missing(t, "docker-registry is not installed (Debian: apt-get install docker-registry; .ci/run installs it)")
	}
	dir := t.TempDir()
	r := &Registry{Dir: filepath.Join(dir, "data")}
	auth := ""
	if o.Token {
		r.User, r.Password = "mstore", "t0ken-pass"
		auth = startTokenServer(t, dir, r.User, r.Password).config()
	}
	if o.Auth {
		r.User, r.Password = "mstore", "s3cret-pass"
		h, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(r.User+":"+string(h)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: mstore-test\n    path: %s\n", pw)
	}
	for attempt := 0; attempt < 3; attempt++ {
		// The port is free when chosen; another process may take it before
		// the registry binds it, so a registry that does not answer is retried.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.Host = l.Addr().String()
		l.Close()
		cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n%s",
			r.Dir, r.Host, auth)
		cfgPath := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r.log = &bytes.Buffer{}
		r.cmd = exec.Command(bin, "serve", cfgPath)
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if r.ready() {
			t.Cleanup(func() {
				r.cmd.Process.Kill()
				r.cmd.Wait()
			})
			return r
		}
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	t.Fatalf("docker-registry did not start: %s", r.log)
	return nil
}

// ready waits until the registry answers /v2/ (200, or 401 behind auth).
func (r *Registry) ready() bool {
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r.cmd.ProcessState != nil {
			return false
		}
		resp, err := c.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return true
			}
		}
	}
	return false
}

// URL is oci://HOST/path.
func (r *Registry) URL(path string) string { return "oci://" + r.Host + "/" + path }

// DockerConfig writes a docker config.json holding the account's
// credentials for this registry and returns its path.
func (r *Registry) DockerConfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	if err := os.WriteFile(p, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.Host, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// BlobFile is where the registry keeps blob d (sha256:HEX), to damage it.
func (r *Registry) BlobFile(d string) string {
	hex := d[len("sha256:"):]
	return filepath.Join(r.Dir, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}
