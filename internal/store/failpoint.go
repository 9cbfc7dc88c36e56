package store

// Failpoints are named instants at which a test can make an mstore process
// stop abruptly, to prove that a crash there loses nothing. They exist only
// in a binary built with `-tags failpoints` (as the e2e tests build it); in
// any other build Failpoint does nothing, so a released mstore cannot be
// made to kill itself by its environment. In a failpoints build the
// environment variable MSTORE_FAILPOINT names one:
//
//	MSTORE_FAILPOINT=NAME        the process SIGKILLs itself at NAME
//	MSTORE_FAILPOINT=NAME:stop   the process SIGSTOPs itself at NAME and goes
//	                             on when it receives SIGCONT
//
// and MSTORE_INDEX_RANGE_BYTES=N cuts the key space into ranges of N bytes
// of index (rangeIndexBytes), so that a test's small index is written in
// several batches and the instants between them can be reached.
//
// The points of an add, in order: FailBlobTempWritten, FailBeforeSync,
// FailAfterRename, FailBlobsDurable, FailBeforeIndexCommit,
// FailAfterIndexCommit. The manifest, the blob records and the ref are
// written in one index transaction, so there is no instant between the
// index commit and the ref write: FailAfterIndexCommit is after both,
// before the command reports success. gc has its own points (package gc).
//
// The names are declared here, in every build; the mechanism is in
// failpoint_on.go (tag failpoints) and failpoint_off.go (no tag).
const (
	// FailBlobTempWritten: a blob's bytes are in a temp file (the first
	// blob of a batch, loose or packed).
	FailBlobTempWritten = "blob-temp-written"
	// FailBeforeSync: every temp file of a batch is written and closed,
	// before the syncfs that makes them durable.
	FailBeforeSync = "blobs-before-sync"
	// FailAfterRename: the batch's files are renamed under objects/,
	// before the syncfs that makes the directory entries durable.
	FailAfterRename = "blobs-after-rename"
	// FailBlobsDurable: the batch is durable under its final names and not
	// yet recorded in the index.
	FailBlobsDurable = "blobs-durable"
	// FailBeforeIndexCommit: an index transaction has made all its changes
	// and has not committed (any command's write transaction).
	FailBeforeIndexCommit = "index-before-commit"
	// FailAfterIndexCommit: an index transaction has committed durably.
	FailAfterIndexCommit = "index-after-commit"
	// FailCheckoutFileWritten: a checkout has written its first file into its temp directory.
	FailCheckoutFileWritten = "checkout-file-written"
	// FailCheckoutRecordTemp: a checkout's record of what it wrote is in a temp file under tmp/.
	FailCheckoutRecordTemp = "checkout-record-temp"
	// FailCheckoutExchanged: a checkout has swapped its tree with DEST's, before removing the old one.
	FailCheckoutExchanged = "checkout-exchanged"
	// FailAddParsed: an add has parsed its model and read nothing else yet.
	FailAddParsed = "add-parsed"
	// FailAddBlobsRecorded: an add has recorded its first batch of blobs (RecordAhead), before its version is committed.
	FailAddBlobsRecorded = "add-blobs-recorded"
	// FailPullBlobsRecorded: a pull has recorded its first round of fetched blobs, before its version is committed.
	FailPullBlobsRecorded = "pull-blobs-recorded"
	// FailPushBlobsSent: a push has had its first request of blobs accepted by the remote.
	FailPushBlobsSent = "push-blobs-sent"
	// FailPushBlobsChecked: a push has asked the remote which blobs it has, before sending any.
	FailPushBlobsChecked = "push-blobs-checked"
	// FailPushManifestPut: a push has written its manifest, before its ref or tag moves.
	FailPushManifestPut = "push-manifest-put"
	// FailRemoteGCLocked: gc --remote holds the bucket's gc lock, before it marks and deletes.
	FailRemoteGCLocked = "remote-gc-locked"
)
