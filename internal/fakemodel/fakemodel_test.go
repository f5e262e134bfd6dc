package fakemodel_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/fakemodel"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const tools = `"tools": [
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "n": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}]`

// TestScript: the fake calls each tool in turn, with arguments made from
// its schema, then answers with the results, marked as a fake; each
// request's turn is counted.
func TestScript(t *testing.T) {
	s := &fakemodel.Server{}
	url, err := fakemodel.Start(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Model   string
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   string
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	_ = json.NewDecoder(post(t, url, `{"messages": [{"role": "user", "content": "Research weft."}], `+tools+`}`).Body).Decode(&c)
	if c.Model != fakemodel.Model || len(c.Choices) != 1 || c.Choices[0].FinishReason != "tool_calls" ||
		c.Choices[0].Message.ToolCalls[0].Function.Name != "search" || c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"n":1,"query":"Research weft."}` {
		t.Errorf("turn 0: %+v", c)
	}
	turn2 := `{"messages": [{"role": "user", "content": "Research weft."}, {"role": "assistant"}, {"role": "tool", "content": "found it"},
		{"role": "assistant"}, {"role": "tool", "content": [{"type": "text", "text": "noted"}]}], ` + tools + `}`
	_ = json.NewDecoder(post(t, url, turn2).Body).Decode(&c)
	if want := `[fake model] I was asked "Research weft.". The tools said: found it; noted`; c.Choices[0].Message.Content != want || c.Choices[0].FinishReason != "stop" {
		t.Errorf("turn 2: %q, want %q", c.Choices[0].Message.Content, want)
	}
	if got := s.Requests(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("turns = %v", got)
	}
	if resp, _ := http.Get(url + "/chat/completions"); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET: %v", resp)
	}
	if resp := post(t, url, `{`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("junk: %d", resp.StatusCode)
	}
}

// TestStreamPace: a streamed answer comes word by word, WordDelay apart,
// and ends with [DONE].
func TestStreamPace(t *testing.T) {
	url, err := fakemodel.Start(t.Context(), &fakemodel.Server{WordDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	resp := post(t, url, `{"stream": true, "messages": [{"role": "user", "content": "one two three"}]}`)
	var text string
	var times []time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if line == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal([]byte(line), &ch) == nil && len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != "" {
			text += ch.Choices[0].Delta.Content
			times = append(times, time.Since(began))
		}
	}
	if !strings.HasPrefix(text, fakemodel.Prefix+" I was asked \"one two three\".") {
		t.Errorf("streamed %q", text)
	}
	if n := len(times); n < 3 || times[n-1]-times[0] < time.Duration(n-1)*50*time.Millisecond {
		t.Errorf("%d words over %s, want them 50ms apart", n, times[len(times)-1]-times[0])
	}
}
