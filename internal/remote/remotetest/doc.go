// Package remotetest is the conformance suite every remote.Remote
// implementation passes (as go-git's storer tests are for its storers).
package remotetest
