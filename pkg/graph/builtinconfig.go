package graph

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	wexpr "github.com/weft-dev/weft/internal/expr"
)

// validateBuiltinConfig refuses what a graph must not hold in the config of
// the built-in http and llm executors: secrets (events copy the graph) and
// the choice of where a worker's secrets go. The executors check the same
// (package builtin: CheckHTTPConfig, CheckLLMConfig, kept equal by a test
// there); checking here too rejects the graph before a run starts.
func validateBuiltinConfig(n *Node, bad func(field, format string, args ...any)) {
	if len(n.Config) == 0 || (n.Type != "http" && n.Type != "llm") {
		return
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(n.Config, &cfg) != nil {
		return // the executor reports a malformed config
	}
	const endpoint = `name an endpoint configured on the worker ("endpoint": "NAME"; nodeworker -llm-endpoint name=NAME,url=URL,key=SECRET)`
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch lk := strings.ToLower(k); {
		case n.Type == "llm" && (lk == "baseurl" || lk == "url"):
			bad("config."+k, "a graph does not choose the llm URL: %s", endpoint)
		case n.Type == "llm" && (lk == "apikeyenv" || lk == "apikey"):
			bad("config."+k, "a graph does not choose the llm API key: it belongs to the endpoint; %s", endpoint)
		case n.Type == "http" && lk == "url":
			var s string
			if json.Unmarshal(cfg[k], &s) != nil {
				continue
			}
			if u, err := url.Parse(s); err == nil && u.User != nil {
				bad("config."+k, "%s holds credentials (user:password@): a graph must not hold secrets, since events copy it; send them in a header that references a secret configured on the worker, e.g. \"Authorization\": \"Basic ${secret:NAME}\"", u.Redacted())
			}
		case n.Type == "http" && lk == "headers":
			var hs map[string]string
			if json.Unmarshal(cfg[k], &hs) != nil {
				continue
			}
			names := make([]string, 0, len(hs))
			for h := range hs {
				names = append(names, h)
			}
			slices.Sort(names)
			for _, h := range names {
				switch strings.ToLower(h) {
				case "authorization", "cookie", "proxy-authorization":
					if hs[h] != "" && !strings.Contains(hs[h], "${secret:") {
						bad("config.headers."+h, "a credential must not be written in the graph (events copy it); reference a secret configured on the worker: \"${secret:NAME}\" (e.g. \"Bearer ${secret:API_TOKEN}\")")
					}
				}
			}
		}
	}
}

// validateExecutorConfig checks, at load, what the built-in executors
// would otherwise reject only when a run reaches the node: a transform's
// CEL that does not compile, a sleep's duration that does not parse, an
// http URL that is not an absolute http(s) URL. A config that is not a
// JSON object is the executor's to report.
func validateExecutorConfig(n *Node, o *options, bad func(field, format string, args ...any)) {
	if len(n.Config) == 0 {
		return
	}
	switch n.Type {
	case "transform":
		var cfg struct {
			Set    map[string]string `json:"set"`
			Output string            `json:"output"`
		}
		if json.Unmarshal(n.Config, &cfg) != nil {
			return
		}
		keys := make([]string, 0, len(cfg.Set))
		for k := range cfg.Set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if _, err := wexpr.Compile(cfg.Set[k], wexpr.Any, o.costLimit); err != nil {
				bad("config.set."+k, "%v", err)
			}
		}
		if cfg.Output != "" {
			if _, err := wexpr.Compile(cfg.Output, wexpr.Any, o.costLimit); err != nil {
				bad("config.output", "%v", err)
			}
		}
	case "sleep":
		var cfg struct {
			Duration json.RawMessage `json:"duration"`
		}
		if json.Unmarshal(n.Config, &cfg) != nil || len(cfg.Duration) == 0 {
			return
		}
		var v any
		_ = json.Unmarshal(cfg.Duration, &v)
		switch v := v.(type) {
		case string:
			if d, err := time.ParseDuration(v); err != nil || d < 0 {
				bad("config.duration", "%q is not a duration: write one like \"1.5s\" or \"2m\", or a number of milliseconds", v)
			}
		case float64:
			if v < 0 {
				bad("config.duration", "must not be negative, got %g", v)
			}
		default:
			bad("config.duration", "want a duration like \"1.5s\" or a number of milliseconds, got %s", cfg.Duration)
		}
	case "http":
		var cfg struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(n.Config, &cfg) != nil || cfg.URL == "" || strings.Contains(cfg.URL, "{{") {
			return // templated URLs are resolved at run time
		}
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("config.url", "%q is not an absolute http or https URL", cfg.URL)
		}
	}
}
