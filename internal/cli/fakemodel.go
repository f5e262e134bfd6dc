package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weft-dev/weft/internal/fakemodel"
	"github.com/weft-dev/weft/internal/nodeworker"
	"github.com/weft-dev/weft/pkg/graph"
)

// fakeEndpoint is the llm endpoint name under which 'weft demo' serves its
// built-in fake model (package fakemodel).
const fakeEndpoint = "fake"

// usesFakeModel reports whether an agent or llm node of the graph (or of
// its subgraphs) names the endpoint "fake".
func usesFakeModel(def *graph.Definition) bool {
	for _, n := range def.Nodes {
		if n.Type != "agent" && n.Type != "llm" {
			continue
		}
		var cfg struct {
			Endpoint string `json:"endpoint"`
		}
		if json.Unmarshal(n.Config, &cfg) == nil && cfg.Endpoint == fakeEndpoint {
			return true
		}
	}
	for _, sub := range def.Graphs {
		if usesFakeModel(sub) {
			return true
		}
	}
	return false
}

// startFakeModel starts the fake model on 127.0.0.1 until ctx ends, and
// returns its URL; it refuses when the environment configures a real
// endpoint under the fake's name, which the fake would otherwise shadow.
// pace, when positive, is waited before each answer and between the
// words of a streamed one (weft dev -fake-model-pace: to watch the
// tokens come in the UI).
func startFakeModel(ctx context.Context, pace time.Duration) (string, error) {
	if slices.Contains(nodeworker.EnvLLMEndpointNames(), fakeEndpoint) {
		return "", fmt.Errorf("WEFT_LLM_ENDPOINTS configures an endpoint named %q, the name of the built-in fake model: rename it, or point the graph at it by another name", fakeEndpoint)
	}
	return fakemodel.Start(ctx, &fakemodel.Server{Delay: pace, WordDelay: pace})
}

// fakeModelBanner is what demo and dev print when the fake model serves.
func fakeModelBanner(url string) string {
	return fmt.Sprintf("FAKE MODEL: the llm endpoint %q is weft's built-in scripted fake at %s, not a real model", fakeEndpoint, url)
}
