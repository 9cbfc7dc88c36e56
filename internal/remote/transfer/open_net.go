package transfer

import (
	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/remote"
)

func openNetwork(u string, o OpenOptions) (remote.Remote, error) {
	return nil, errs.New(errs.UnsupportedVersion, "remote", "%q: this kind of remote is not built yet", u)
}
