package natsconn

import (
	"net/url"
	"strings"
)

// Redact returns a server URL, or a comma-separated list of them, without
// user information ("nats://u:p@host:4222" becomes "nats://host:4222"), for
// logs, errors and output. A user name can be a token, so it goes too.
func Redact(urls string) string {
	if !strings.Contains(urls, "@") {
		return urls
	}
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redactOne(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		u.User = nil
		return u.String()
	}
	// Not a URL url.Parse understands ("u:p@host:4222", or a password with
	// characters it refuses): drop everything up to the last '@' after the
	// scheme, which is where user information ends.
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = s[:i+3], s[i+3:]
	}
	host := s
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if at := strings.LastIndex(host, "@"); at >= 0 {
		s = s[at+1:]
	}
	return scheme + s
}

// urlUser is the user name in the first URL of a list, if any.
func urlUser(urls string) string {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.User == nil {
		return ""
	}
	if _, hasPassword := u.User.Password(); !hasPassword {
		return "" // a token, not a user name
	}
	return u.User.Username()
}

// redactErr makes sure an error does not carry the password or a URL's
// user information in its text.
func redactErr(err error, secrets ...string) error {
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		if s != "" {
			clean = strings.ReplaceAll(clean, s, "***")
		}
	}
	if strings.Contains(clean, "@") && strings.Contains(clean, "://") {
		fields := strings.Fields(clean)
		for i, f := range fields {
			if strings.Contains(f, "://") {
				fields[i] = Redact(f)
			}
		}
		clean = strings.Join(fields, " ")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// redactedError has a redacted message and keeps the original for
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
