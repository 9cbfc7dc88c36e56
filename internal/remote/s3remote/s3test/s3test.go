package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/mstore/mstore/internal/testenv"
)

// Version is the versitygw release the tests use.
const Version = "v1.8.0"

// Binary finds versitygw: $MSTORE_VERSITYGW, else the cache folder .ci/run
// builds it into, else $PATH.
func Binary() (string, error) {
	if p := os.Getenv("MSTORE_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	p := filepath.Join(cache, "mstore-ci", "versitygw-"+Version, "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return exec.LookPath("versitygw")
}

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Dir       string // the directory it serves; a bucket is a folder in it
	cmd       *exec.Cmd
	log       *bytes.Buffer
}

// Env is the environment a client of the server needs.
func (s *Server) Env() []string {
	return []string{"AWS_ENDPOINT_URL=" + s.Endpoint, "AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=us-east-1"}
}

// Start starts versitygw for the test, or skips the test without it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		msg := fmt.Sprintf("versitygw %s is not built (.ci/run builds it: GOFLAGS=-mod=mod GOBIN=DIR go install github.com/versity/versitygw/cmd/versitygw@%s)", Version, Version)
		testenv.Missing(t, "%s", msg)
	}
	dir := t.TempDir()
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		// The port is free when chosen; another process may take it before
		// versitygw binds it, so a server that exits at once is retried.
		s, ok := start(t, bin, dir)
		if ok {
			return s
		}
		lastLog = s.log.String()
	}
	t.Fatalf("versitygw did not start: %s", lastLog)
	return nil
}

func start(t testing.TB, bin, dir string) (*Server, bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{Endpoint: "http://" + addr, AccessKey: "mstoretestaccess", SecretKey: "mstoretestsecretkey0123", Dir: dir, log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "--port", addr, "posix", s.Dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			return s, false
		default:
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-done
			t.Fatalf("versitygw did not listen on %s in 20 s: %s", addr, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-done
	})
	return s, true
}

// Bucket creates a bucket and returns its name.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatalf("make bucket %s: %v\n%s", name, err, s.log)
	}
	return name
}
