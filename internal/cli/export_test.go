package cli

import "io"

// SetTerminal makes the CLI take stdout for a terminal (or not) until the
// returned function restores it.
func SetTerminal(is bool) (restore func()) {
	terminal = func(io.Writer) bool { return is }
	return func() { terminal = isTerminal }
}

// SetStdinTerminal makes demo take its stdin for a terminal (or not)
// until the returned function restores it.
func SetStdinTerminal(is bool) (restore func()) {
	old := stdinTerminal
	stdinTerminal = func(io.Reader) bool { return is }
	return func() { stdinTerminal = old }
}
