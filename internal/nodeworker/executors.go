package nodeworker

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/worker/builtin"
)

// ExecutorConfig is what the worker allows the built-in executors: the
// http executor's address policy and limits, where secrets come from, the
// llm endpoints, the template limits. None of it comes from a graph.
type ExecutorConfig struct {
	// HTTPAllow is the http executor's allow-list (builtin.AddressPolicy).
	HTTPAllow        []string
	HTTPMaxBody      int64
	HTTPMaxRedirects int
	// SecretsDir holds one file per secret; WEFT_SECRET_<NAME> variables
	// are read as well.
	SecretsDir   string
	LLMEndpoints []LLMEndpoint
	// TemplateMaxOutput and TemplateMaxIterations bound prompt templates.
	TemplateMaxOutput     int
	TemplateMaxIterations int

	flagErrs []error // from -llm-endpoint, reported by Validate
}

// LLMEndpoint is one -llm-endpoint:
// name=NAME,url=URL[,key=SECRET][,provider=openai|anthropic].
type LLMEndpoint struct {
	Name, URL, KeySecret, Provider string
}

// executorEnv maps the executor flags to their environment variables.
var executorEnv = map[string]string{
	"http-allow":              "WEFT_HTTP_ALLOW",
	"http-max-body":           "WEFT_HTTP_MAX_BODY",
	"http-max-redirects":      "WEFT_HTTP_MAX_REDIRECTS",
	"secrets-dir":             "WEFT_SECRETS_DIR",
	"llm-endpoint":            "WEFT_LLM_ENDPOINTS",
	"template-max-output":     "WEFT_TEMPLATE_MAX_OUTPUT",
	"template-max-iterations": "WEFT_TEMPLATE_MAX_ITERATIONS",
}

type listFlag struct{ to *[]string }

func (l listFlag) String() string {
	if l.to == nil {
		return ""
	}
	return strings.Join(*l.to, ",")
}

func (l listFlag) Set(s string) error {
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*l.to = append(*l.to, e)
		}
	}
	return nil
}

type endpointFlag struct {
	to   *[]LLMEndpoint
	errs *[]error
}

func (f endpointFlag) String() string {
	if f.to == nil {
		return ""
	}
	var names []string
	for _, e := range *f.to {
		names = append(names, e.Name)
	}
	return strings.Join(names, ",")
}

// Set reads one endpoint, or several separated by ';' (the environment
// variable's form). Problems are reported by Validate, which never
// repeats the value (a URL may hold a password by mistake).
func (f endpointFlag) Set(s string) error {
	for one := range strings.SplitSeq(s, ";") {
		if one = strings.TrimSpace(one); one == "" {
			continue
		}
		e, err := parseEndpoint(one)
		if err != nil {
			*f.errs = append(*f.errs, err)
			continue
		}
		*f.to = append(*f.to, e)
	}
	return nil
}

func parseEndpoint(s string) (LLMEndpoint, error) {
	var e LLMEndpoint
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch {
		case !ok:
			return e, errors.New("-llm-endpoint: want name=NAME,url=URL[,key=SECRET], comma separated")
		case k == "name":
			e.Name = v
		case k == "url":
			e.URL = v
		case k == "key":
			e.KeySecret = v
		case k == "provider":
			e.Provider = v
		default:
			return e, fmt.Errorf("-llm-endpoint: unknown field %q (want name, url, key, provider)", k)
		}
	}
	return e, nil
}

// RegisterFlags adds the executor flags to fs.
func (c *ExecutorConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(listFlag{&c.HTTPAllow}, "http-allow", "hosts (api.example.com, *.example.com, with an optional :port), IP addresses and CIDR networks the http executor may reach, comma separated; loopback, link-local and private addresses only when listed as addresses or networks (env WEFT_HTTP_ALLOW; default: any public address)")
	fs.Int64Var(&c.HTTPMaxBody, "http-max-body", builtin.DefaultMaxBody, "largest http and llm response body in bytes; larger fails the node (env WEFT_HTTP_MAX_BODY)")
	fs.IntVar(&c.HTTPMaxRedirects, "http-max-redirects", builtin.DefaultMaxRedirects, "redirects the http executor follows, each checked again; -1: none (env WEFT_HTTP_MAX_REDIRECTS)")
	fs.StringVar(&c.SecretsDir, "secrets-dir", "", "directory with one file per secret, for ${secret:NAME} references and llm keys; WEFT_SECRET_<NAME> variables are read too (env WEFT_SECRETS_DIR)")
	fs.Var(endpointFlag{&c.LLMEndpoints, &c.flagErrs}, "llm-endpoint", "an llm endpoint graphs pick by name: name=NAME,url=BASE_URL[,key=SECRET][,provider=openai|anthropic], the key being a secret's name; repeat for more (env WEFT_LLM_ENDPOINTS, separated by ';')")
	fs.IntVar(&c.TemplateMaxOutput, "template-max-output", builtin.DefaultTemplateMaxOutput, "largest output of a prompt template in bytes (env WEFT_TEMPLATE_MAX_OUTPUT)")
	fs.IntVar(&c.TemplateMaxIterations, "template-max-iterations", builtin.DefaultTemplateMaxIterations, "range iterations a prompt template may run (env WEFT_TEMPLATE_MAX_ITERATIONS)")
}

// Validate reports every problem with the executor configuration.
func (c *ExecutorConfig) Validate() error {
	errs := append([]error(nil), c.flagErrs...)
	if _, err := builtin.NewAddressPolicy(c.HTTPAllow); err != nil {
		errs = append(errs, fmt.Errorf("-http-allow: %w", err))
	}
	if c.HTTPMaxBody < 1 {
		errs = append(errs, fmt.Errorf("-http-max-body: want at least 1 byte, got %d", c.HTTPMaxBody))
	}
	if c.HTTPMaxRedirects < -1 {
		errs = append(errs, fmt.Errorf("-http-max-redirects: want -1 (none) or more, got %d", c.HTTPMaxRedirects))
	}
	if c.SecretsDir != "" {
		if st, err := os.Stat(c.SecretsDir); err != nil || !st.IsDir() {
			errs = append(errs, fmt.Errorf("-secrets-dir: %q is not a directory", c.SecretsDir))
		}
	}
	errs = append(errs, checkEndpoints(c.LLMEndpoints)...)
	if c.TemplateMaxOutput < 1 || c.TemplateMaxIterations < 1 {
		errs = append(errs, errors.New("-template-max-output, -template-max-iterations: want at least 1"))
	}
	return errors.Join(errs...)
}

// checkEndpoints reports every problem with the -llm-endpoint flags: a
// name that is not a token or given twice, an unknown provider, a URL that
// is not http(s) or carries credentials.
func checkEndpoints(eps []LLMEndpoint) []error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range eps {
		switch {
		case !eventlog.ValidToken(e.Name):
			errs = append(errs, fmt.Errorf("-llm-endpoint: name %q: want letters, digits, '-' and '_'", e.Name))
		case seen[e.Name]:
			errs = append(errs, fmt.Errorf("-llm-endpoint: %q given twice", e.Name))
		}
		seen[e.Name] = true
		if e.Provider != "" && e.Provider != builtin.ProviderOpenAI && e.Provider != builtin.ProviderAnthropic {
			errs = append(errs, fmt.Errorf("-llm-endpoint %s: provider: want %s or %s, got %q", e.Name, builtin.ProviderOpenAI, builtin.ProviderAnthropic, e.Provider))
		}
		if !strings.HasPrefix(e.URL, "http://") && !strings.HasPrefix(e.URL, "https://") {
			errs = append(errs, fmt.Errorf("-llm-endpoint %s: url: want an absolute http(s) URL", e.Name))
		} else if strings.Contains(strings.SplitN(strings.SplitN(e.URL, "://", 2)[1], "/", 2)[0], "@") {
			errs = append(errs, fmt.Errorf("-llm-endpoint %s: url: no credentials in the URL; give the key as key=SECRET", e.Name))
		}
	}
	return errs
}

// options are the builtin options of the configuration (valid).
func (c *ExecutorConfig) options() []builtin.Option {
	policy, _ := builtin.NewAddressPolicy(c.HTTPAllow)
	secrets := builtin.SecretsFromEnv(nil)
	if c.SecretsDir != "" {
		secrets = builtin.SecretsFromDir(c.SecretsDir).Or(secrets)
	}
	opts := []builtin.Option{
		builtin.WithAddressPolicy(policy),
		builtin.WithSecrets(secrets),
		builtin.WithMaxResponse(c.HTTPMaxBody),
		builtin.WithMaxRedirects(c.HTTPMaxRedirects),
		builtin.WithTemplateLimits(builtin.TemplateLimits{MaxOutput: c.TemplateMaxOutput, MaxIterations: c.TemplateMaxIterations}),
	}
	for _, e := range c.LLMEndpoints {
		opts = append(opts, builtin.WithLLMEndpoint(e.Name, builtin.LLMEndpoint{URL: e.URL, KeySecret: e.KeySecret, Provider: e.Provider}))
	}
	return opts
}

// describe is the executor configuration for the start log line: names
// and limits, never a secret.
func (c *ExecutorConfig) describe() []any {
	names := make([]string, 0, len(c.LLMEndpoints))
	for _, e := range c.LLMEndpoints {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return []any{"http_allow", strings.Join(c.HTTPAllow, ","), "llm_endpoints", strings.Join(names, ","), "secrets_dir", c.SecretsDir != ""}
}

// ExecutorOptionsFromEnv reads the executor configuration from the
// WEFT_* variables alone (the defaults when unset), for the worker that
// 'weft dev' and 'weft demo' embed.
func ExecutorOptionsFromEnv() ([]builtin.Option, error) {
	var c ExecutorConfig
	fs := flag.NewFlagSet("executors", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := natsconn.ApplyEnv(fs, executorEnv); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.options(), nil
}

// EnvLLMEndpointNames lists the names of the llm endpoints the
// environment (WEFT_LLM_ENDPOINTS) configures, for 'weft demo' to refuse
// a configured endpoint under its fake model's name.
func EnvLLMEndpointNames() []string {
	var eps []LLMEndpoint
	var errs []error
	_ = endpointFlag{&eps, &errs}.Set(os.Getenv(executorEnv["llm-endpoint"]))
	names := make([]string, 0, len(eps))
	for _, e := range eps {
		names = append(names, e.Name)
	}
	return names
}
