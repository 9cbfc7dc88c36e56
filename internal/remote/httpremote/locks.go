package httpremote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote"
)

// A push through serve over a backend that needs a push lock (a bucket,
// remote.PushLocker) holds one for its client: POST /v1/locks/push takes
// it and answers its id, the client names the id in lockHeader on every
// request after, and DELETE /v1/locks/push/{id} releases it. A lock whose
// client has sent nothing for lockIdle is released (the client is gone);
// a server killed leaves the lock to go stale in the bucket.
const (
	lockHeader   = "Mstore-Push-Lock"
	maxHeldLocks = 256
)

var lockIdle = 30 * time.Minute

type heldLocks struct {
	mu   sync.Mutex
	held map[string]*time.Timer // id → releases the lock when it fires
	rel  map[string]func()
}

func (s *server) lockPush(w http.ResponseWriter, r *http.Request) error {
	pl, ok := s.o.Backend.(remote.PushLocker)
	if !ok {
		return errs.New(errs.NotFound, "serve", "this server's backend takes no push lock")
	}
	s.locks.mu.Lock()
	n := len(s.locks.held)
	s.locks.mu.Unlock()
	if n >= maxHeldLocks {
		return errs.New(errs.SizeLimitExceeded, "serve", "%d pushes hold locks already; push again later", n)
	}
	release, err := pl.LockPush(r.Context())
	if err != nil {
		return err
	}
	var rnd [16]byte
	rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	s.locks.mu.Lock()
	if s.locks.held == nil {
		s.locks.held, s.locks.rel = map[string]*time.Timer{}, map[string]func(){}
	}
	s.locks.rel[id] = release
	s.locks.held[id] = time.AfterFunc(lockIdle, func() { s.locks.release(id) })
	s.locks.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
	return nil
}

func (s *server) unlockPush(w http.ResponseWriter, r *http.Request) error {
	if !s.locks.release(r.PathValue("id")) {
		return errs.New(errs.NotFound, "serve", "no push lock %q here (released after %s idle, or held by a server since restarted)", r.PathValue("id"), lockIdle)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// release releases the lock id; false if this server holds none of that id.
func (h *heldLocks) release(id string) bool {
	h.mu.Lock()
	t, ok := h.held[id]
	rel := h.rel[id]
	delete(h.held, id)
	delete(h.rel, id)
	h.mu.Unlock()
	if ok {
		t.Stop()
		rel()
	}
	return ok
}

// touchLocks keeps a lock whose client is still sending requests, at the
// start and at the end of each.
func (s *server) touchLocks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(lockHeader)
		touch := func() {
			s.locks.mu.Lock()
			if t, ok := s.locks.held[id]; ok {
				t.Reset(lockIdle)
			}
			s.locks.mu.Unlock()
		}
		if id != "" {
			touch()
			defer touch()
		}
		next.ServeHTTP(w, r)
	})
}

// LockPush implements remote.PushLocker: the server takes the lock its
// backend needs. A server that takes none (an older one, or one over a
// store, which orders pushes and gc itself) answers not_found: no lock.
func (c *Client) LockPush(ctx context.Context) (func(), error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/locks/push", nil, "", nil, &out, nil)
	if errs.ClassOf(err) == errs.NotFound {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	c.pushLock.Store(&out.ID)
	return func() {
		c.pushLock.Store(nil)
		c.do(context.Background(), http.MethodDelete, "/v1/locks/push/"+out.ID, nil, "", nil, nil, nil)
	}, nil
}
