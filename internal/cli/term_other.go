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

// isTTY would report whether f is a terminal; here nothing is taken for
// one (weft demo prints the command that answers an approval instead).
func isTTY(*os.File) bool { return false }
