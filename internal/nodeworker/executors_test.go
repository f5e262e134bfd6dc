package nodeworker_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/nodeworker"
)

// TestExecutorFlags: the executors' flags and variables are checked before
// anything starts, every problem at once, and no secret is repeated.
func TestExecutorFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "bad allow-list", args: []string{"-http-allow", "10.0.0.0/33,a b"}, want: []string{`allow "10.0.0.0/33"`, `allow "a b"`}},
		{name: "endpoint", args: []string{"-llm-endpoint", "name=x.y,url=ftp://h", "-llm-endpoint", "url=https://h"}, want: []string{`name "x.y"`, "-llm-endpoint x.y: url", `name ""`}},
		{name: "endpoint field", args: []string{"-llm-endpoint", "name=a,url=https://h,token=T"}, want: []string{`unknown field "token"`}},
		{name: "endpoint provider", args: []string{"-llm-endpoint", "name=a,url=https://h,provider=gemini"}, want: []string{`-llm-endpoint a: provider: want openai or anthropic, got "gemini"`}},
		{name: "endpoint env", env: map[string]string{"WEFT_LLM_ENDPOINTS": "name=a,url=https://u:pw-123@h/v1;name=a,url=https://h"}, want: []string{"no credentials in the URL", `"a" given twice`}},
		{name: "limits", args: []string{"-http-max-body", "0", "-http-max-redirects", "-2", "-secrets-dir", "/nonexistent", "-template-max-output", "0"}, want: []string{"-http-max-body", "-http-max-redirects", "-secrets-dir", "-template-max-output"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := nodeworker.Run(context.Background(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
			if !errors.Is(err, nodeworker.ErrUsage) {
				t.Fatalf("Run = %v, want a usage error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "pw-123") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
