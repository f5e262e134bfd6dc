package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weft-dev/weft/pkg/events"
)

var cmdKeys = &command{
	name:    "keys",
	args:    "new -out FILE | rotate FILE",
	summary: "make and rotate the key ring events' data is sealed with",
	help: `Key rings seal events' data (inputs, invocation state, outputs, state
updates, signal data) with AES-256-GCM; the envelope stays plain. Every
process of a deployment (clients, coordinators, workers, the UI) takes the
same ring: -encrypt-keys FILE, or WEFT_ENCRYPT_KEYS holding the ring itself.

'weft keys new -out FILE' writes a new ring of one key (mode 0600; FILE
must not exist). 'weft keys rotate FILE' puts a new key first in the
ring: new events are sealed with it, older ones stay readable under the
keys after it. Rotation, step by step: rotate the file, give it to every
process that reads (workers, coordinators, the UI), restart them, then to
the writers (clients). A key is retired by deleting its line once no run
that needs it is kept (after the retention period, or once its runs are
archived and purged); until then, a process without it refuses those
events with an error naming the key id. The file holds secrets: it
never leaves the machines that run Weft, and nothing prints its keys.`,
	run: func(e *env, c *command, args []string) error {
		if len(args) == 0 || (args[0] != "new" && args[0] != "rotate") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
				fs, _ := e.flagSet(c)
				e.printHelp(c, fs)
				return flag.ErrHelp
			}
			return &usageError{cmd: c, msg: "want new or rotate"}
		}
		if args[0] == "new" {
			return e.skeleton(c.with(0, 0, connNone, keysNewFlags), args[1:])
		}
		return e.skeleton(c.with(1, 1, connNone, func(*flag.FlagSet) action {
			return action{do: func(e *env, x *call) error { return rotateKeys(e, x.args[0]) }}
		}), args[1:])
	},
}

// keysNewFlags is the flags function of 'weft keys new'.
func keysNewFlags(fs *flag.FlagSet) action {
	out := fs.String("out", "", "the key file to write (must not exist)")
	id := fs.String("id", "k1", "the key's id")
	return action{do: func(e *env, x *call) error {
		c := x.cmd
		if *out == "" {
			return &usageError{cmd: c, msg: "keys new: -out FILE is required"}
		}
		k, err := events.NewKey(*id)
		if err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		ring := events.KeyRing{k}
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("keys new: %w", err)
		}
		if _, err := f.WriteString(ring.Text()); err != nil {
			_ = f.Close()
			return fmt.Errorf("keys new: writing %s: %w", *out, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("keys new: writing %s: %w", *out, err)
		}
		fmt.Fprintf(e.stdout, "wrote %s: current key %s\n", *out, k.ID)
		return nil
	}}
}

// rotateKeys puts a new key first in the key file, replacing the file
// atomically (a rename), with its mode kept.
func rotateKeys(e *env, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	ring, err := events.ParseKeyRing(path, string(b))
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	if ring, err = ring.Rotate(); err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".weft-keys-*")
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone by the rename, unless it failed
	_, werr := tmp.WriteString(ring.Text())
	err = errors.Join(werr, tmp.Chmod(st.Mode().Perm()), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("keys rotate: %w", err)
	}
	fmt.Fprintf(e.stdout, "rotated %s: current key %s, %d keys\n", path, ring[0].ID, len(ring))
	return nil
}
