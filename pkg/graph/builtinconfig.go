package graph

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
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
