package builtin

// The checks a graph's built-in configuration gets before it is accepted,
// for the external tests.
var (
	CheckHTTPConfig = checkHTTPConfig
	CheckLLMConfig  = checkLLMConfig
)
