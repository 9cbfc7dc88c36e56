// Package transfer moves model versions between the local store and a
// remote.Remote: Pull and Push move only the blobs the other side lacks,
// verify every blob before it is written, and record a version only once
// all its blobs are there. Open turns a remote's URL into a remote.Remote.
package transfer
