// Package httpremote is the HTTP protocol between `mstore serve` and its
// clients: Handler serves any remote.Remote (a local store, or a bucket),
// and Client is the remote.Remote that speaks to it.
//
// Every endpoint is under /v1/; GET /v1/capabilities says what the server
// offers so that later versions can negotiate.
//
//	GET  /v1/capabilities
//	POST /v1/blobs/has          {"digests":[HEX…]}     → {"have":[bool…]}
//	GET  /v1/blobs/HEX          (Range supported, immutable)
//	POST /v1/blobs/get          {"digests":[HEX…]}     → frames: len(8, big-endian) bytes …
//	POST /v1/blobs/get          {"digests":[…],"accept":["grouped","delta"]} → coded frames
//	POST /v1/blobs              frames: digest(32) len(8) bytes …   (push)
//	POST /v1/blobs/coded        coded frames, each after its digest(32) → {"raw":[HEX…]}  (push)
//	GET  /v1/manifests/HEX      PUT /v1/manifests/HEX  (push)
//	GET  /v1/refs?name=NAME                            → {"name","current","history":[HEX…]}
//	POST /v1/refs?name=NAME     {"from","to","message"}  (push; compare-and-swap)
//	GET  /v1/tags?name=NAME&tag=TAG                    → {"digest"}
//	PUT  /v1/tags?name=NAME&tag=TAG {"digest"}         → {"created"}  (push)
//
// Coded blobs: a server whose store keeps blobs coded lists the codings
// in its capabilities ("codings"); a client that knows them may ask for
// blobs as stored (a coded frame: coding(1) raw size(8) base(32) len(8)
// bytes) and send them so. The receiver decodes each and checks its raw
// digest before storing it, coded; a delta whose base it lacks comes raw
// (a pull asks again without "accept"; a push is told in "raw"). A client
// never sends "accept" to a server that lists no codings: an older server
// refuses the field.
//
// An error is {"error":{"class","message"},"missing":[HEX…]} with a status
// that follows from the class; 401 is a missing or wrong token.
package httpremote
