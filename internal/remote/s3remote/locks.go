package s3remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/mstore/mstore/internal/errs"
)

// A bucket has no lock of its own, so pushes and gc take lock objects
// under PREFIX/locks/, created with If-None-Match: *:
//
//	locks/push-RANDOM  one per push, from before it asks which blobs the
//	                   bucket has until its ref or tag has moved
//	locks/gc           at most one: a gc, from before it marks until it
//	                   has deleted
//
// Each writes its own lock and then looks for the other kind. With the
// store's read-after-write consistency one of the two always sees the
// other's lock (whichever lists second), so a gc never deletes a blob a
// push has found present and not yet made reachable: the push refuses, or
// the gc refuses. A lock is rewritten every lockRefresh while held; one not
// rewritten for staleAfter, or whose process on this host is gone, is
// stale: ignored, reported, and removed by gc --remove-stale-locks.
var (
	staleAfter  = 30 * time.Minute
	lockRefresh = 5 * time.Minute // SigV4 refuses clocks more than 15 min apart: a held lock never looks stale
)

// maxLockDoc bounds a lock object read.
const maxLockDoc = 4096

// LockInfo describes a lock object found in a bucket.
type LockInfo struct {
	Key       string    `json:"key"`
	Kind      string    `json:"kind"` // push, gc, or unknown (a body that does not parse)
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Since     time.Time `json:"since"`
	Refreshed time.Time `json:"refreshed"`
	Stale     bool      `json:"stale"`
	Removed   bool      `json:"removed,omitempty"`
}

type lockDoc struct {
	Kind string    `json:"kind"`
	Host string    `json:"host"`
	PID  int       `json:"pid"`
	Time time.Time `json:"time"`
}

// Lock is a lock object this process holds and refreshes.
type Lock struct {
	r    *Remote
	key  string
	doc  []byte // unique to this holder (pid and time to the nanosecond)
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (r *Remote) lockKey(name string) string { return r.prefix + "locks/" + name }

// errHeld is takeLock's answer when the lock object exists.
var errHeld = errors.New("held")

func (r *Remote) takeLock(ctx context.Context, name, kind string) (*Lock, error) {
	host, _ := os.Hostname()
	doc, _ := json.Marshal(lockDoc{Kind: kind, Host: host, PID: os.Getpid(), Time: time.Now().UTC()})
	l := &Lock{r: r, key: r.lockKey(name), doc: doc, stop: make(chan struct{}), done: make(chan struct{})}
	if err := r.put(ctx, l.key, doc, true, ""); isPrecondition(err) {
		return nil, errHeld
	} else if err != nil {
		return nil, r.wrap(err, "create lock "+name+" in")
	}
	go func() {
		defer close(l.done)
		t := time.NewTicker(lockRefresh)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				ctx := context.WithoutCancel(ctx)
				etag, ok := l.owned(ctx)
				if !ok {
					return // removed as stale, maybe taken by another: not ours to write
				}
				r.put(ctx, l.key, doc, false, etag) // a failed refresh is retried next tick
			}
		}
	}()
	return l, nil
}

// owned reports whether the lock object is still this holder's, and its ETag.
func (l *Lock) owned(ctx context.Context) (string, bool) {
	b, etag, err := l.r.get(ctx, l.key, maxLockDoc, minio.GetObjectOptions{})
	return etag, err == nil && bytes.Equal(b, l.doc)
}

// Release stops refreshing the lock and deletes it if it is still this
// holder's (a gc may have removed it as stale, and another taken it).
func (l *Lock) Release() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		ctx := context.Background()
		if _, ok := l.owned(ctx); ok {
			l.r.c.RemoveObject(ctx, l.r.bucket, l.key, minio.RemoveObjectOptions{})
		}
	})
}

// readLock describes the lock object o; one that does not parse is of
// kind unknown, held until it is stale by age.
func (r *Remote) readLock(ctx context.Context, o minio.ObjectInfo) (LockInfo, error) {
	info := LockInfo{Key: o.Key, Kind: "unknown", Refreshed: o.LastModified.UTC()}
	b, _, err := r.get(ctx, o.Key, maxLockDoc, minio.GetObjectOptions{})
	if isNotFound(err) {
		return info, errHeld // released meanwhile
	}
	if err != nil && errs.ClassOf(err) != errs.SizeLimitExceeded {
		return info, r.wrap(err, "read lock "+o.Key+" of")
	}
	var doc lockDoc
	if err == nil && json.Unmarshal(b, &doc) == nil && (doc.Kind == "push" || doc.Kind == "gc") {
		info.Kind, info.Host, info.PID, info.Since = doc.Kind, doc.Host, doc.PID, doc.Time
	}
	host, _ := os.Hostname()
	gone := info.Host == host && info.PID > 0 && syscall.Kill(info.PID, 0) == syscall.ESRCH
	info.Stale = gone || time.Since(o.LastModified) > staleAfter
	return info, nil
}

// Locks lists the lock objects of the bucket prefix.
func (r *Remote) Locks(ctx context.Context) ([]LockInfo, error) {
	var out []LockInfo
	err := r.list(ctx, "locks/", func(o minio.ObjectInfo) error {
		info, err := r.readLock(ctx, o)
		if err == errHeld {
			return nil
		}
		out = append(out, info)
		return err
	})
	return out, err
}

func (r *Remote) gcLock(ctx context.Context) (*LockInfo, error) {
	o, err := r.c.StatObject(ctx, r.bucket, r.lockKey("gc"), minio.StatObjectOptions{})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, r.wrap(err, "stat lock gc of")
	}
	info, err := r.readLock(ctx, o)
	if err == errHeld {
		return nil, nil
	}
	return &info, err
}

// LockPush takes a push's lock: a gc of the bucket cannot delete while it
// is held. A running gc is a conflict; the push should be run again later.
func (r *Remote) LockPush(ctx context.Context) (release func(), err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	l, err := r.takeLock(ctx, "push-"+hex.EncodeToString(rnd[:]), "push")
	if err == errHeld {
		return nil, errs.New(errs.Conflict, "s3", "lock name collision in %s; push again", r.url)
	}
	if err != nil {
		return nil, err
	}
	gc, err := r.gcLock(ctx)
	if err == nil && gc != nil && !gc.Stale {
		err = errs.New(errs.Conflict, "s3", "gc --remote is collecting %s (%s, host %s pid %d, since %s); push again when it has finished (a gc lock not refreshed for %s is stale and ignored)",
			r.url, gc.Key, gc.Host, gc.PID, gc.Since.Format(time.RFC3339), staleAfter)
	}
	if err != nil {
		l.Release()
		return nil, err
	}
	return l.Release, nil
}

// LockGC takes the gc lock and checks that no push holds one. A fresh lock
// of another gc or of a push is a conflict; stale ones are ignored and
// returned, and deleted first if removeStale.
func (r *Remote) LockGC(ctx context.Context, removeStale bool) (*Lock, []LockInfo, error) {
	var stale []LockInfo
	l, err := r.takeLock(ctx, "gc", "gc")
	if err == errHeld {
		gc, gerr := r.gcLock(ctx)
		switch {
		case gerr != nil:
			return nil, nil, gerr
		case gc != nil && !gc.Stale:
			return nil, nil, errs.New(errs.Conflict, "s3", "another gc --remote is collecting %s (%s, host %s pid %d, since %s); let it finish", r.url, gc.Key, gc.Host, gc.PID, gc.Since.Format(time.RFC3339))
		case gc != nil && !removeStale:
			return nil, nil, errs.New(errs.Conflict, "s3", "%s holds a stale gc lock (%s, host %s pid %d, last refreshed %s): that gc is gone; run gc again with --remove-stale-locks",
				r.url, gc.Key, gc.Host, gc.PID, gc.Refreshed.Format(time.RFC3339))
		case gc != nil:
			if err := r.removeLock(ctx, gc); err != nil {
				return nil, nil, err
			}
			stale = append(stale, *gc)
		}
		l, err = r.takeLock(ctx, "gc", "gc")
		if err == errHeld {
			return nil, nil, errs.New(errs.Conflict, "s3", "another gc --remote took the lock of %s just now; let it finish", r.url)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	locks, err := r.Locks(ctx)
	for _, k := range locks {
		if err != nil || k.Key == l.key {
			continue
		}
		switch {
		case !k.Stale:
			err = errs.New(errs.Conflict, "s3", "a push into %s is running (%s, host %s pid %d, since %s); run gc again when it has finished (a lock not refreshed for %s is stale and ignored)",
				r.url, k.Key, k.Host, k.PID, k.Since.Format(time.RFC3339), staleAfter)
		case removeStale:
			err = r.removeLock(ctx, &k)
			stale = append(stale, k)
		default:
			stale = append(stale, k)
		}
	}
	if err != nil {
		l.Release()
		return nil, nil, err
	}
	return l, stale, nil
}

// removeLock deletes a stale lock, unless it was refreshed since it was read.
func (r *Remote) removeLock(ctx context.Context, k *LockInfo) error {
	o, err := r.c.StatObject(ctx, r.bucket, k.Key, minio.StatObjectOptions{})
	if isNotFound(err) {
		k.Removed = true
		return nil
	}
	if err != nil {
		return r.wrap(err, "stat lock "+k.Key+" of")
	}
	if !o.LastModified.Truncate(time.Second).Equal(k.Refreshed.Truncate(time.Second)) { // HEAD has whole seconds
		return errs.New(errs.Conflict, "s3", "lock %s of %s was refreshed meanwhile: its owner is alive; run gc again later", k.Key, r.url)
	}
	if err := r.c.RemoveObject(ctx, r.bucket, k.Key, minio.RemoveObjectOptions{}); err != nil {
		return r.wrap(err, "remove lock "+k.Key+" of")
	}
	k.Removed = true
	return nil
}
