package e2e

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testToken = "e2e-push-token"

// server is a running `mstore serve`.
type server struct {
	url   string
	store string
	cmd   *exec.Cmd
	done  chan struct{}
	log   *bytes.Buffer
}

// tokenFile writes the test token to a file and returns its path.
func tokenFile(t *testing.T) string {
	t.Helper()
	return writeFile(t, filepath.Join(t.TempDir(), "token"), []byte(testToken+"\n"))
}

// startServe starts `mstore --store STORE serve --addr ADDR args...` and
// waits for the URL it prints. The server is killed when the test ends.
func startServe(t *testing.T, store, addr string, env []string, args ...string) *server {
	t.Helper()
	s := &server{store: store, done: make(chan struct{}), log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, append([]string{"--store", store, "serve", "--addr", addr}, args...)...)
	s.cmd.Env = append(cleanEnv(), env...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		i := strings.LastIndex(line, " ")
		if !strings.HasPrefix(line, "serving ") || i < 0 {
			t.Fatalf("serve printed %q\nstderr: %s", line, s.log)
		}
		s.url = strings.TrimSpace(line[i+1:])
	case <-time.After(20 * time.Second):
		t.Fatalf("serve printed no URL in 20 s\nstderr: %s", s.log)
	}
	return s
}

// addr is the server's HOST:PORT.
func (s *server) addr() string {
	_, rest, _ := strings.Cut(s.url, "://")
	return rest
}

// stop kills the server and waits for it.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// pushServer starts a server over a fresh store that accepts pushes with
// testToken.
// servedBase starts a push server and pushes the fixture's base to it, as
// llm, from a new store: how most serve tests begin.
func servedBase(t *testing.T) (remoteFixture, *server, *cli, transferResult) {
	t.Helper()
	fx := newRemoteFixture(t)
	srv := pushServer(t)
	a := newCLI(t)
	a.add(fx.base, "--name", "llm")
	pushed := a.transfer([]string{"MSTORE_TOKEN=" + testToken}, "push", srv.url, "llm")
	return fx, srv, a, pushed
}

func pushServer(t *testing.T) *server {
	t.Helper()
	return startServe(t, filepath.Join(t.TempDir(), "served"), "127.0.0.1:0", nil, "--allow-push", "--token-file", tokenFile(t))
}

func httpRemoteKind() remoteKind {
	return remoteKind{name: "http", env: []string{"MSTORE_TOKEN=" + testToken},
		fresh: func(t *testing.T) string { return pushServer(t).url }}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key, made for
// the test, and returns their paths.
func selfSignedCert(t *testing.T) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mstore e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
