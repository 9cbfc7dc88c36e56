package modeldir

import "golang.org/x/sys/unix"

// mount names the filesystem mount a file is on: its device, and the
// mount's id, which tells a bind mount from its source even on one device.
type mount struct {
	dev uint64
	id  uint64
}

// mountOf returns the mount of path itself (a link is not followed). A
// variable, so that tests can stand in for a mount without privileges.
var mountOf = func(path string) (mount, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st); err != nil {
		return mount{}, err
	}
	m := mount{dev: unix.Mkdev(st.Dev_major, st.Dev_minor)}
	if st.Mask&unix.STATX_MNT_ID != 0 {
		m.id = st.Mnt_id
	}
	return m, nil
}
