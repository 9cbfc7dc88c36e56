// Package ocitest starts a real OCI registry for tests: Debian's
// docker-registry (CNCF distribution 2.8) over a temp directory on
// 127.0.0.1, from a config file the test writes, optionally behind
// htpasswd basic auth or behind its token auth (a token service the test
// runs on 127.0.0.1). .ci/run installs the package; a test without it
// skips with a message, or fails when MSTORE_REQUIRE_TESTDATA=1.
package ocitest
