package natsconn

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// anonymousProbeTimeout bounds AnonymousAccess: a server that does not
// answer an anonymous connection soon enough is taken as refusing it.
const anonymousProbeTimeout = 3 * time.Second

// AnonymousAccess checks whether a connection without credentials to
// url (with c's TLS settings, none of its user's) reaches the events
// stream c names: then anyone who can reach the server may start runs,
// forge events and delete the stream, as deploy/nats's configurations
// allowed before authorization was on. It returns a warning to print or
// log loudly, or "" when the server refuses such a connection or shows
// it no such stream. It reads the stream's information and nothing else.
func (c *Config) AnonymousAccess(ctx context.Context, url string) string {
	if url == "" {
		url = c.URL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	if urlUser(url) != "" {
		url = Redact(url) // probe without the URL's user
	}
	opts := []nats.Option{nats.Name("weft anonymous-access probe"), nats.Timeout(anonymousProbeTimeout), nats.NoReconnect()}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return ""
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, anonymousProbeTimeout)
	defer cancel()
	if _, err := js.Stream(ctx, c.Stream); err != nil {
		return "" // refused, or no such stream in its account
	}
	return fmt.Sprintf("the NATS server at %s takes anonymous connections, and they reach the events stream %s: anyone who can connect may start runs, forge events and delete the stream. Turn authorization on: 'weft roles -out deploy/nats/auth' and include auth.conf in every server's configuration (deploy/SECURITY.md)", Redact(url), c.Stream)
}
