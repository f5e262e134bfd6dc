package natsconn_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/natsconn"
)

func TestValidateReportsEveryProblem(t *testing.T) {
	c := natsconn.Config{Storage: "tape", Replicas: 7, TLSCert: "x.pem", Stream: ""}
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"-storage", "-replicas", "-tls-cert and -tls-key", "-stream"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestApplyEnv(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	n := fs.Int("n", 1, "")
	s := fs.String("s", "a", "")
	if err := fs.Parse([]string{"-s", "flag"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_N", "5")
	t.Setenv("X_S", "env")
	if err := natsconn.ApplyEnv(fs, map[string]string{"n": "X_N", "s": "X_S"}); err != nil {
		t.Fatal(err)
	}
	if *n != 5 || *s != "flag" {
		t.Fatalf("n=%d s=%q: the environment fills unset flags only", *n, *s)
	}
	t.Setenv("X_N", "five")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Int("n", 1, "")
	if err := natsconn.ApplyEnv(fs2, map[string]string{"n": "X_N"}); err == nil || !strings.Contains(err.Error(), `X_N="five"`) {
		t.Fatalf("bad value: %v", err)
	}
}

func TestApplyEnvConnectionFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c natsconn.Config
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("WEFT_REPLICAS", "3")
	t.Setenv("X_UNDEFINED", "y")
	if err := natsconn.ApplyEnv(fs, map[string]string{"undefined": "X_UNDEFINED"}); err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://127.0.0.1:1" || c.Replicas != 3 {
		t.Fatalf("config %+v", c)
	}
	t.Setenv("WEFT_REPLICAS", "three")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	var c2 natsconn.Config
	c2.RegisterFlags(fs2)
	if err := natsconn.ApplyEnv(fs2); err == nil || !strings.Contains(err.Error(), `WEFT_REPLICAS="three"`) {
		t.Fatalf("bad replicas: %v", err)
	}
}
