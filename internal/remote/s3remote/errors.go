package s3remote

import (
	"context"
	"fmt"
	"net/http"

	"github.com/minio/minio-go/v7"

	"github.com/mstore/mstore/internal/errs"
)

// How an object store's answers map to mstore's error classes.

func code(err error) (int, string) {
	e := minio.ToErrorResponse(err)
	return e.StatusCode, e.Code
}

func isNotFound(err error) bool {
	status, c := code(err)
	return status == http.StatusNotFound || c == "NoSuchKey"
}

// isPrecondition is a conditional write that lost (412; 409 is what AWS
// answers for two conditional writes of one key at once).
func isPrecondition(err error) bool {
	status, c := code(err)
	return status == http.StatusPreconditionFailed || c == "PreconditionFailed" ||
		status == http.StatusConflict || c == "ConditionalRequestConflict"
}

// isUnauthorized is the object store refusing the credentials: a missing,
// unknown or wrong key, or a key without the right to this bucket.
func isUnauthorized(err error) bool {
	status, c := code(err)
	switch c {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
		"XAdminUserNotFound": // versitygw's unknown access key, with a 404
		return true
	}
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// absent returns notFound, the not_found of an object that a GET or HEAD
// answered 404 to, unless the object store refuses the credentials: some
// (versitygw) answer an unknown access key's GET or HEAD with a 404 whose
// body a HEAD does not carry. A listing, which has a body, tells them
// apart, and a missing object is rare enough to afford one.
func (r *Remote) absent(ctx context.Context, notFound error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range r.c.ListObjects(lctx, r.bucket, minio.ListObjectsOptions{Prefix: r.prefix, MaxKeys: 1}) {
		if o.Err != nil && isUnauthorized(o.Err) {
			return r.wrap(o.Err, "list")
		}
		break
	}
	return notFound
}

func (r *Remote) wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	if errs.ClassOf(err) != 0 {
		return err
	}
	if isUnauthorized(err) {
		return errs.Wrap(errs.Unauthorized, "s3", err, "%s %s: the object store refused the credentials; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and the key's rights on the bucket)", what, r.url)
	}
	return fmt.Errorf("s3: %s %s: %w", what, r.url, err)
}
