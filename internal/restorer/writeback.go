package restorer

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f at off to
// disk, without waiting (sync_file_range(2), SYNC_FILE_RANGE_WRITE). The
// disk then writes while the rest of the checkout is copied and hashed,
// instead of all at once in publish's syncfs, which still makes it
// durable: a hint, whose result is ignored.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// writebackEvery is how many bytes the streaming writer writes between two
// startWriteback calls.
const writebackEvery = 8 << 20

// writebackWriter is a file written in order whose pages are sent to disk
// every writebackEvery bytes.
type writebackWriter struct {
	f        *os.File
	at, sent int64
}

func (w *writebackWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.at += int64(n)
	if w.at-w.sent >= writebackEvery {
		startWriteback(w.f, w.sent, w.at-w.sent)
		w.sent = w.at
	}
	return n, err
}
