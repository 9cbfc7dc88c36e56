// Package refs owns model names, tags, the append-only history of each ref,
// and the resolution of version names (NAME, NAME:TAG, NAME@DIGEST, DIGEST,
// NAME~N) to manifest digests.
//
// Every change (Move, Tag, RemoveTag, RemoveRef, TrimHistory) is also noted
// for the store's journal (internal/journal.Add), in the same transaction,
// so that a lost index can be rebuilt by replaying them in order.
//
// It keeps its state in four top-level buckets of the store's bbolt index
// and works inside a *bolt.Tx that the store opens; it never opens the
// database itself. Every value read is copied out before the call returns.
//
//	"refs"     NAME            → v1 | current digest (32) | entries (u64) | moved (12)
//	"history"  NAME (bucket)
//	             seq (u64 BE)  → v1 | digest (32) | previous (32) | time (12) | message
//	"tags"     NAME 0x00 TAG   → v1 | digest (32)
//	"retired_tags" NAME 0x00 TAG → v1 | digest (32)   (removed tags)
//
// v1 is a one-byte record version (1). A time is Unix seconds (i64 BE) then
// nanoseconds (u32 BE), read back as UTC. Integers are big-endian, so each
// history bucket iterates oldest first, and seq comes from the bucket's own
// sequence: it is never reused, even after TrimHistory. NUL sorts before every
// byte a name may hold, so the tags bucket is in (name, tag) order and one
// name's tags are a contiguous run. The refs record repeats what the newest
// history entry says, so that listing thousands of refs never opens a history;
// Check verifies that they agree.
//
// Rules:
//   - A ref moves; each move appends one history entry. Moving a ref to where
//     it already points appends nothing.
//   - A tag never moves: re-creating it at its digest is a no-op, at another
//     digest a conflict. RemoveTag retires it: it stops keeping its version
//     from gc, and it can only ever be created again at the same digest.
//   - RemoveRef drops the ref and its history but keeps its tags, as git does:
//     NAME:TAG stays a stable name for as long as the tag exists.
//   - TrimHistory drops old entries but always keeps the current target.
//     NAME@DIGEST and NAME~N only see the entries kept.
//   - Copy starts a new ref at a version with a history of one entry;
//     Rename moves a ref's whole history to a new name through Move and
//     RemoveRef, so the journal replays it as it is; tags stay with the
//     old name. Both refuse a name that is already a ref (conflict).
//   - Holders says which names (NAME, NAME~N, NAME:TAG) keep each version,
//     and, given a Without (refs, tags, history or versions taken away),
//     which would keep it after rm or trim: gc's estimates are made from it.
//   - Names are case-sensitive and never contain '@', ':', '~' or "..".
//   - A digest may be pasted as blake3:HEX; sha256:HEX is refused
//     (schema_error) with a pointer to `mstore show --sha256`.
//
// Errors are classified with internal/errs: bad names are schema_error;
// unknown names, tags, digests, and ambiguous digest prefixes are not_found
// (their message lists the candidates and what to run next); a tag that would
// move is conflict; a record that does not decode is integrity_error.
package refs
