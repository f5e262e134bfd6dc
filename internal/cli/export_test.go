package cli

import "io"

// SetTerminal makes the CLI take stdout for a terminal (or not) until the
// returned function restores it.
func SetTerminal(is bool) (restore func()) {
	terminal = func(io.Writer) bool { return is }
	return func() { terminal = isTerminal }
}
