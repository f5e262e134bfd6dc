package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/suggest"
)

// flagSet returns the flag set of a command, with the -o flag every command
// has.
func (e *env) flagSet(c *command) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("weft "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", e.output, "output format: text or json")
	return fs, out
}

// parse parses args into fs, with flags and positional arguments in any
// order, and checks there are between min and max positional arguments
// (max < 0: no limit). "-h" prints the command's help and returns
// flag.ErrHelp.
func (e *env) parse(c *command, fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				e.printHelp(c, fs)
				return nil, err
			}
			return nil, &usageError{cmd: c, msg: err.Error() + flagSuggestion(fs, err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || max >= 0 && len(pos) > max {
		want := c.args
		if want == "" {
			want = "no arguments"
		}
		return nil, &usageError{cmd: c, msg: fmt.Sprintf("want %s, got %d argument(s)", want, len(pos))}
	}
	if err := natsconn.ApplyEnv(fs); err != nil {
		return nil, &usageError{cmd: c, msg: err.Error()}
	}
	if f := fs.Lookup("o"); f != nil {
		if err := checkOutput(f.Value.String()); err != nil {
			err.(*usageError).cmd = c
			return nil, err
		}
	}
	return pos, nil
}

func (e *env) printHelp(c *command, fs *flag.FlagSet) {
	fmt.Fprintf(e.help, "usage: weft %s\n\n%s\n\nFlags:\n", c.synopsis(), strings.TrimSpace(c.help))
	fs.SetOutput(e.help)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func checkOutput(o string) error {
	if o != "text" && o != "json" {
		return &usageError{msg: fmt.Sprintf("-o: want text or json, got %q", o)}
	}
	return nil
}

// jsonArg reads a flag's JSON value: inline JSON, "@FILE" for a file's
// contents, or "@-" for standard input. Empty gives nil.
func (e *env) jsonArg(c *command, flagName, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	data := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if name == "-" {
			data, err = io.ReadAll(e.stdin)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, &usageError{cmd: c, msg: fmt.Sprintf("-%s: %v", flagName, err)}
		}
	}
	data = bytes.TrimSpace(data)
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, &usageError{cmd: c, msg: fmt.Sprintf("-%s: not valid JSON: %v", flagName, err)}
	}
	return buf.Bytes(), nil
}

// objectArg is jsonArg for a value that must be a JSON object.
func (e *env) objectArg(c *command, flagName, v string) (json.RawMessage, error) {
	raw, err := e.jsonArg(c, flagName, v)
	if err != nil || raw == nil {
		return raw, err
	}
	if raw[0] != '{' {
		return nil, &usageError{cmd: c, msg: fmt.Sprintf("-%s: want a JSON object, got %s", flagName, truncate(string(raw), 40))}
	}
	return raw, nil
}

// writeJSON writes v as indented JSON.
func (e *env) writeJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// flagSuggestion is " (did you mean -status?)" for an unknown flag close
// to one fs has, else "".
func flagSuggestion(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := suggest.Closest(strings.TrimPrefix(name, "-"), names); s != "" {
		return " (did you mean -" + s + "?)"
	}
	return ""
}
