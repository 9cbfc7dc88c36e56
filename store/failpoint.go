package store

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Failpoints are named instants at which a test can make an mstore process
// stop abruptly, to prove that a crash there loses nothing. The environment
// variable MSTORE_FAILPOINT names one:
//
//	MSTORE_FAILPOINT=NAME        the process SIGKILLs itself at NAME
//	MSTORE_FAILPOINT=NAME:stop   the process SIGSTOPs itself at NAME and goes
//	                             on when it receives SIGCONT
//
// The points of an add, in order: FailBlobTempWritten, FailBeforeSync,
// FailAfterRename, FailBlobsDurable, FailBeforeIndexCommit,
// FailAfterIndexCommit. The manifest, the blob records and the ref are
// written in one index transaction, so there is no instant between the
// index commit and the ref write: FailAfterIndexCommit is after both,
// before the command reports success. gc has its own points (package gc).
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
	// FailPullBlobsRecorded: a pull has recorded its first round of fetched blobs, before its version is committed.
	FailPullBlobsRecorded = "pull-blobs-recorded"
	// FailPushBlobsSent: a push has had its first request of blobs accepted by the remote.
	FailPushBlobsSent = "push-blobs-sent"
)

var failpoint = sync.OnceValues(func() (name, action string) {
	v := os.Getenv("MSTORE_FAILPOINT")
	name, action, _ = strings.Cut(v, ":")
	return name, action
})

var failpointFired atomic.Bool

// Failpoint stops the process if MSTORE_FAILPOINT names point, the first
// time the process reaches it. Without the variable it costs a comparison.
func Failpoint(point string) {
	name, action := failpoint()
	if name == "" || name != point || failpointFired.Swap(true) {
		return
	}
	switch action {
	case "stop":
		// A signal to oneself is delivered asynchronously: wait for the
		// SIGCONT, so that nothing runs past the point before the stop.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		fmt.Fprintf(os.Stderr, "mstore: failpoint %s: stopped (send SIGCONT to go on)\n", point)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-cont
	default:
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; run nothing else
	}
}
