// Package s3test starts a real S3-compatible server for tests: versitygw
// over a temp directory on 127.0.0.1. .ci/run builds the binary into a
// cache folder; a test without it skips with a message, or fails when
// MSTORE_REQUIRE_TESTDATA=1.
package s3test
