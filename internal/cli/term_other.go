//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package cli

import (
	"errors"
	"os"
)

// readHidden would read a line from a terminal without echoing it.
func readHidden(*os.File) (string, error) {
	return "", errors.New("reading a password from a terminal without showing it is not supported here: pipe it in")
}
