package store_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mstore/mstore/internal/journal"
	"github.com/mstore/mstore/internal/names"
	"github.com/mstore/mstore/internal/store"
	"github.com/mstore/mstore/internal/store/storetest"
)

// The packed blobs of an add are journaled many to a line (packrun
// records); the index rebuilt from that journal, or from the same journal
// written one line per packed blob as older builds did, has every blob
// record it had, and the version checks out.
func TestRebuildFromPackRunsAndPerBlobLines(t *testing.T) {
	for _, kind := range []string{"packrun", "per-blob lines"} {
		t.Run(kind, func(t *testing.T) {
			st, v1 := oneVersion(t)
			before := storetest.BlobRecords(t, st)
			packed := 0
			for _, r := range before {
				if r.Encoding == store.EncodingPacked {
					packed++
				}
			}
			jpath := filepath.Join(st.Dir(), "journal")
			text, err := os.ReadFile(jpath)
			if err != nil {
				t.Fatal(err)
			}
			if packed < 2 || bytes.Count(text, []byte(`"op":"packrun"`)) == 0 || bytes.Contains(text, []byte(`"op":"packed"`)) {
				t.Fatalf("test setup: %d packed blobs, journal:\n%s", packed, text)
			}
			if kind == "per-blob lines" {
				log, err := journal.Read(jpath)
				if err != nil {
					t.Fatal(err)
				}
				old := jpath + ".old"
				for _, b := range log.Batches {
					if err := journal.Append(old, b.Seq, b.Records); err != nil {
						t.Fatal(err)
					}
				}
				if text, _ = os.ReadFile(old); bytes.Count(text, []byte(`"op":"packed"`)) != packed || bytes.Contains(text, []byte("packrun")) {
					t.Fatalf("the rewritten journal:\n%s", text)
				}
				if err := os.Rename(old, jpath); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Remove(filepath.Join(st.Dir(), "index.db")); err != nil {
				t.Fatal(err)
			}
			rep, err := names.RebuildIndex(context.Background(), st.Dir(), store.Options{}, 2)
			if err != nil || !rep.OK {
				t.Fatalf("rebuild: %+v, %v", rep, err)
			}
			if st, err = store.Open(st.Dir(), false, store.Options{}); err != nil {
				t.Fatal(err)
			}
			if after := storetest.BlobRecords(t, st); !reflect.DeepEqual(after, before) {
				t.Fatalf("%d blob records after the rebuild, %d before (or some differ)", len(after), len(before))
			}
			storetest.RequireCheckout(t, st, "m", v1)
			storetest.Fsck(t, st, store.FsckOptions{})
		})
	}
}
