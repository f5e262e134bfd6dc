// Package nodeconfig holds the rules for the configs of the built-in node
// executors that are checked twice: by the executors (pkg/worker/builtin)
// when they run a node, and by graph validation (pkg/graph) when a graph
// is loaded. Keeping each rule once here means a graph that loads holds
// configs its executors accept.
//
// A node's template (the llm executor's prompt and system message) is Go
// text/template with missingkey=error, the built-in functions plus a
// bounded printf, and no {{define}}, {{block}} or {{template}}, so no
// recursion (ParseTemplate; the executor also bounds the execution). A
// duration is a Go duration string or a number of milliseconds, not
// negative (ParseDuration). A secret is referenced in a header value as
// ${secret:NAME} (SecretRef, SecretName, HasSecretRef), and a sensitive
// header takes its value from one (SensitiveHeaders, Sensitive,
// CheckHeaders).
package nodeconfig
