package pytorch

import (
	"bytes"
	"io"
	"strings"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/zipfile"
)

// member is one entry of a checkpoint's zip archive (formats/zipfile),
// with its name inside the archive's folder.
type member struct {
	z      *zipfile.Member
	name   string // as stored, e.g. "archive/data/0"
	record string // name without the archive folder, e.g. "data/0"
	method uint16
	crc    uint32
	size   int64 // compressed == uncompressed: only stored members are read
	data   int64 // offset of the first data byte
	dir    bool  // a directory entry ("name/", no data)
}

// archive is a checkpoint's zip structure: members in file order, and
// where the central directory starts.
type archive struct {
	z        *zipfile.Archive
	path     string
	size     int64
	folder   string // the one top-level folder every member is in
	members  []*member
	byRecord map[string]*member
	cdStart  int64
}

// readArchive reads and checks the zip structure of a checkpoint with the
// shared zip reader (formats/zipfile), and what torch.save's archives
// are: every member in one folder, no TorchScript code, nothing
// compressed. Data is not read here; checkCRCs does that.
func readArchive(r *blockReader, size int64, path string, lim Limits) (*archive, error) {
	z, err := zipfile.ReadDirectory(r, size, path, pkg, zipfile.Limits{MaxMembers: lim.MaxMembers, MaxCentralDirectory: lim.MaxCentralDirectory})
	if err != nil {
		return nil, err
	}
	r.skipData(z.Members) // the local headers are read next, not the data after them
	a := &archive{z: z, path: path, size: size, byRecord: make(map[string]*member, len(z.Members)), cdStart: z.CDStart}
	for _, zm := range z.Members {
		a.members = append(a.members, &member{z: zm, name: zm.Name, method: zm.Method, crc: zm.CRC, size: zm.Size, dir: zm.Dir})
	}
	if err := a.checkFolder(); err != nil {
		return nil, err
	}
	if err := a.checkTorchScript(); err != nil {
		return nil, err
	}
	if err := z.ReadLocals(r); err != nil {
		return nil, err
	}
	byZ := make(map[*zipfile.Member]*member, len(a.members))
	for _, m := range a.members {
		byZ[m.z] = m
	}
	for i, zm := range z.Members { // now in file order
		m := byZ[zm]
		m.data = zm.Data
		a.members[i] = m
	}
	return a, nil
}

func (a *archive) fail(class errs.Class, at int64, format string, args ...any) error {
	return errs.At(class, pkg, a.path, at, format, args...)
}

// checkFolder checks that every member is inside one top-level folder, the
// one torch.save names after the file ("archive/…", "model/…").
func (a *archive) checkFolder() error {
	first := a.members[0].name
	folder, _, ok := strings.Cut(first, "/")
	if !ok || folder == "" {
		return a.fail(errs.SchemaError, -1, "member %q is not inside a folder: a torch.save archive keeps everything in one top-level folder", first)
	}
	a.folder = folder
	for _, m := range a.members {
		rest, ok := strings.CutPrefix(m.name, folder+"/")
		if !ok {
			if m.dir && m.name == folder+"/" {
				continue
			}
			return a.fail(errs.SchemaError, -1, "member %q is outside the archive's folder %q", m.name, folder)
		}
		m.record = rest
		if !m.dir {
			a.byRecord[rest] = m
		}
	}
	return nil
}

// checkTorchScript refuses torch.jit.save archives, whose code/ folder holds
// Python source that torch.jit.load compiles and runs, and compressed
// members, which torch.save never writes.
func (a *archive) checkTorchScript() error {
	for _, m := range a.members {
		if strings.HasPrefix(m.record, "code/") || m.record == "constants.pkl" || m.record == "bytecode.pkl" {
			return a.fail(errs.UnsupportedVersion, -1,
				"this is a TorchScript archive (torch.jit.save): its %s holds code that runs when it is loaded, so mstore does not take it; save the model's state_dict() with torch.save instead", m.name)
		}
	}
	for _, m := range a.members {
		if m.method != zipfile.Stored {
			return a.fail(errs.UnsupportedVersion, -1, "member %q is compressed (method %d): torch.save stores members uncompressed, and mstore reads only stored members", m.name, m.method)
		}
	}
	return nil
}

// read returns a member's data whole; callers bound its size first.
func (a *archive) read(r io.ReaderAt, m *member) ([]byte, error) { return a.z.Read(r, m.z) }

// checkCRC streams a member's data through CRC-32 and compares it with the
// central directory's.
func (a *archive) checkCRC(r io.ReaderAt, m *member, buf []byte) error {
	return a.z.CheckCRC(r, m.z, buf)
}

// readAt fills b from r at off; a short read is a truncated file.
func readAt(r io.ReaderAt, b []byte, off int64, path string) error {
	return zipfile.ReadAt(r, b, off, pkg, path)
}

// sniff classifies a file that is not a zip archive by its first bytes, so
// that legacy checkpoints get a clear reason.
func sniff(head []byte, path string) error {
	legacyMagic := []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}
	switch {
	case bytes.HasPrefix(head, legacyMagic) || len(head) > 0 && head[0] == 0x80:
		return errs.At(errs.UnsupportedVersion, pkg, path, 0,
			"this is a legacy (pre-1.6, not zip) PyTorch checkpoint: a bare pickle stream that mstore does not read; load it in a trusted environment and save it again with torch.save (zip format), or convert it to SafeTensors")
	case bytes.HasPrefix(head, []byte("PYTORCH1")):
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a checkpoint from PyTorch's preview release format (PYTORCH1), which mstore does not read")
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a legacy tar-format PyTorch checkpoint (PyTorch 0.x), which mstore does not read")
	case bytes.HasPrefix(head, []byte("lmgg")) || bytes.HasPrefix(head, []byte("fmgg")) || bytes.HasPrefix(head, []byte("tjgg")):
		return errs.At(errs.UnsupportedVersion, pkg, path, 0, "this is a GGML model (the format before GGUF), not a PyTorch checkpoint; mstore does not read it")
	}
	return errs.At(errs.InvalidArchive, pkg, path, 0, "not a PyTorch checkpoint: torch.save writes a zip archive, and this file does not start with one")
}
