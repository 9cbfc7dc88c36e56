package transfer

import (
	"net/url"
	"strings"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/pathremote"
	"github.com/mstore/mstore/internal/remote/s3remote"
)

// OpenOptions say how to reach a remote.
type OpenOptions struct {
	// Create makes a missing path remote (a push does).
	Create bool
	// Token is the bearer token for an HTTP remote.
	Token string
	// Timeout is how long a network remote may stall before the command
	// gives up; zero means a minute.
	Timeout time.Duration
	// S3 says how to reach a bucket remote; empty fields come from the
	// AWS_* variables.
	S3 s3remote.Options
}

// Kind says which implementation a remote URL names.
func Kind(u string) string {
	switch {
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		return "http"
	case strings.HasPrefix(u, "s3://"):
		return "s3"
	case strings.HasPrefix(u, "oci://"):
		return "oci" // opened by ociremote, not Open: a registry holds whole files, not blobs
	}
	return "path"
}

// Open returns the remote that u names: a path or file:// URL (another
// store), http(s):// (mstore serve) or s3://BUCKET/PREFIX.
func Open(u string, o OpenOptions) (remote.Remote, error) {
	switch Kind(u) {
	case "path":
		p := u
		if strings.HasPrefix(u, "file://") {
			pu, err := url.Parse(u)
			if err != nil || (pu.Host != "" && pu.Host != "localhost") {
				return nil, errs.New(errs.SchemaError, "remote", "%q: a file URL is file:///PATH", u)
			}
			p = pu.Path
		} else if strings.Contains(u, "://") {
			return nil, errs.New(errs.SchemaError, "remote", "%q: unknown kind of remote (want a path, file://, http(s)://, s3:// or oci://)", u)
		}
		return pathremote.Open(p, o.Create)
	}
	return openNetwork(u, o)
}
