package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzJSONArgs feeds the CLI's JSON flag values (-input of run and demo,
// -data of signal) any text, inline or on standard input ("@-"): parsing
// never panics, a refusal is a usage error that names the command and the
// flag, and what is accepted is compact, valid JSON (an object for
// -input).
func FuzzJSONArgs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, ` { "a" : [1, 2, {"b": null}] } `, `[1]`, `"x"`, `{`, `{"a":}`, "", " ", "\x00", `{"a":1}{"b":2}`, `1e999`, strings.Repeat("[", 5000)} {
		f.Add(s, false)
		f.Add(s, true)
	}
	c := &command{name: "run"}
	f.Fuzz(func(t *testing.T, v string, stdin bool) {
		if strings.HasPrefix(v, "@") {
			v = " " + v // never a file the fuzzer names
		}
		e := &env{stdin: strings.NewReader(v)}
		arg := v
		if stdin {
			arg = "@-"
		}
		for _, object := range []bool{false, true} {
			var raw json.RawMessage
			var err error
			if object {
				raw, err = e.objectArg(c, "input", arg)
				e.stdin = strings.NewReader(v)
			} else {
				raw, err = e.jsonArg(c, "input", arg)
				e.stdin = strings.NewReader(v)
			}
			if err != nil {
				if raw != nil || !errors.Is(err, ErrUsage) || !strings.HasPrefix(err.Error(), "weft run: -input: ") {
					t.Fatalf("refusal of %q: %v", v, err)
				}
				continue
			}
			if raw == nil {
				if arg != "" {
					t.Fatalf("%q gave nothing", arg)
				}
				continue
			}
			var buf bytes.Buffer
			if !json.Valid(raw) || json.Compact(&buf, raw) != nil || !bytes.Equal(buf.Bytes(), raw) {
				t.Fatalf("accepted %q as %q", v, raw)
			}
			if object && raw[0] != '{' {
				t.Fatalf("-input took %q", raw)
			}
		}
	})
}
