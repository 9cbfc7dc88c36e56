package transfer

import (
	"context"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote"
	"github.com/mstore/mstore/internal/remote/httpremote"
	"github.com/mstore/mstore/internal/remote/s3remote"
)

func openNetwork(u string, o OpenOptions) (remote.Remote, error) {
	switch Kind(u) {
	case "http":
		return httpremote.New(context.Background(), u, httpremote.ClientOptions{Token: o.Token, StallTimeout: o.Timeout})
	case "s3":
		return s3remote.Open(u, o.S3)
	case "oci":
		return nil, errs.New(errs.SchemaError, "remote", "%q: an OCI registry takes push and pull only (it holds whole files, not mstore's blobs), not this command", u)
	}
	return nil, errs.New(errs.UnsupportedVersion, "remote", "%q: this kind of remote is not built yet", u)
}
