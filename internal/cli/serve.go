package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/gateway"
)

var cmdServe = &command{
	name:    "serve",
	summary: "serve HTTP endpoints to start and signal runs, and webhooks (docs/http.md)",
	help: `Serves on -addr:

  POST /v1/runs                 start a run: {"graph": {…}, "input": {…}}
  POST /v1/runs/RUN/signal      signal a node: {"node": "…", "data": …}
  POST /v1/webhooks/NAME        a webhook, signed (Weft-Signature: t=…,v1=…)

Runs and signals need "Authorization: Bearer TOKEN", a token of
WEFT_GATEWAY_TOKENS ("alice=TOKEN1,bob=TOKEN2"); an Idempotency-Key header
makes a request safe to send again. -webhook NAME=SUBJECT (repeatable)
publishes each verified body of webhook NAME on SUBJECT, where an event
trigger ('weft trigger create') maps it to a run; its secret is
WEFT_WEBHOOK_SECRET_NAME (upper case, '-' as '_'). Timestamps more than
-tolerance from now are refused. Under 'weft roles', run it as weft-serve
(its .env file), with -webhook-subjects naming the webhooks' subjects there.
See docs/http.md.`,
	conn: connStore,
	flags: func(fs *flag.FlagSet) action {
		addr := fs.String("addr", "127.0.0.1:8088", "listen address")
		tolerance := fs.Duration("tolerance", gateway.DefaultTolerance, "how far a webhook's timestamp may be from now")
		var hooks attrFlag = attrFlag{}
		fs.Var(hooks, "webhook", "NAME=SUBJECT: a webhook and the subject its bodies go to (repeatable)")
		var gc gateway.Config
		check := func(e *env, x *call) error {
			c := x.cmd
			gc = gateway.Config{Tokens: map[string]string{}, Webhooks: map[string]gateway.Webhook{}, Tolerance: *tolerance}
			for pair := range strings.SplitSeq(os.Getenv("WEFT_GATEWAY_TOKENS"), ",") {
				if pair = strings.TrimSpace(pair); pair == "" {
					continue
				}
				name, tok, ok := strings.Cut(pair, "=")
				if !ok || name == "" || len(tok) < 16 {
					return &usageError{cmd: c, msg: "WEFT_GATEWAY_TOKENS: want NAME=TOKEN pairs, tokens of at least 16 characters"}
				}
				gc.Tokens[tok] = name
			}
			for name, subject := range hooks {
				env := "WEFT_WEBHOOK_SECRET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
				secret := os.Getenv(env)
				if len(secret) < 16 {
					return &usageError{cmd: c, msg: fmt.Sprintf("-webhook %s: %s: want a secret of at least 16 characters", name, env)}
				}
				gc.Webhooks[name] = gateway.Webhook{Secret: []byte(secret), Subject: subject}
			}
			if len(gc.Tokens) == 0 && len(gc.Webhooks) == 0 {
				return &usageError{cmd: c, msg: "nothing to serve: set WEFT_GATEWAY_TOKENS, or give -webhook"}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			store, opts := x.store, x.opts
			ln, err := net.Listen("tcp", *addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: gateway.Handler(store, opts, gc), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(e.stderr, "weft serve: listening on http://%s\n", ln.Addr())
			go func() {
				<-e.ctx.Done()
				ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}}
	},
}
