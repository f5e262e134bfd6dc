package builtin

// Option configures the executors Register adds: what the worker allows
// them, never what a graph chooses.
type Option func(*settings)

type settings struct {
	policy       *AddressPolicy
	secrets      Secrets
	maxBody      int64
	maxRedirects int
	endpoints    map[string]LLMEndpoint
	limits       TemplateLimits
}

// WithAddressPolicy sets what the http executor may reach (default: public
// addresses only).
func WithAddressPolicy(p *AddressPolicy) Option { return func(s *settings) { s.policy = p } }

// WithSecrets sets where ${secret:NAME} references and llm endpoint keys
// are resolved (default: nowhere, every reference fails).
func WithSecrets(sec Secrets) Option { return func(s *settings) { s.secrets = sec } }

// WithMaxResponse caps the response body of http and llm requests (default
// DefaultMaxBody, 1 MiB).
func WithMaxResponse(n int64) Option { return func(s *settings) { s.maxBody = n } }

// WithMaxRedirects caps the redirects the http executor follows (default
// DefaultMaxRedirects; negative: none).
func WithMaxRedirects(n int) Option { return func(s *settings) { s.maxRedirects = n } }

// WithLLMEndpoint configures an llm endpoint under name; graphs pick it by
// that name.
func WithLLMEndpoint(name string, e LLMEndpoint) Option {
	return func(s *settings) {
		if s.endpoints == nil {
			s.endpoints = map[string]LLMEndpoint{}
		}
		s.endpoints[name] = e
	}
}

// WithTemplateLimits sets the limits of prompt templates (zero fields keep
// the defaults).
func WithTemplateLimits(l TemplateLimits) Option { return func(s *settings) { s.limits = l } }
