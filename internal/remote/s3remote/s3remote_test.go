package s3remote_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/remotetest"
	"github.com/mstore/mstore/internal/remote/s3remote"
	"github.com/mstore/mstore/internal/remote/s3remote/s3test"
)

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "conformance")
	var n atomic.Int32
	remotetest.Run(t, func(t *testing.T) remote.Remote {
		// Each remote is its own prefix of one bucket.
		r, err := s3remote.Open(fmt.Sprintf("s3://%s/run%d/models", bucket, n.Add(1)), s3remote.Options{
			Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}
