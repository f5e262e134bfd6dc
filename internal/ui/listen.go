package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/weft-dev/weft/internal/logattr"
)

// ErrExposed is wrapped by CheckAddr's error: a non-loopback address
// without credentials.
var ErrExposed = errors.New("refusing to serve the UI beyond this machine without credentials")

// CheckAddr checks that addr ("host:port") may be listened on: a loopback
// address always, any other only with credentials.
func CheckAddr(addr string, credentials bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port, e.g. %s", addr, DefaultAddr)
	}
	if credentials || Loopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("%w: %s is not a loopback address; set credentials (weft ui: -password-file, which 'weft ui hash-password' writes, or -ui-user and -ui-password; or WEFT_UI_PASSWORD_FILE, or WEFT_UI_USER and WEFT_UI_PASSWORD), or listen on 127.0.0.1", ErrExposed, shown)
}

// Loopback says whether host is "localhost" or a loopback IP address.
// Other names are not looked up: they count as reachable from elsewhere.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is a running UI server.
type Server struct {
	hs     *http.Server
	addr   net.Addr
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start checks addr (CheckAddr), listens on it and serves the UI until ctx
// ends or Close. A port in use is an error that says so.
func Start(ctx context.Context, addr string, cfg Config) (*Server, error) {
	if err := CheckAddr(addr, cfg.User != ""); err != nil {
		return nil, err
	}
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listening for the UI on %s: the address is in use (another weft ui or weft dev?): %w", addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("listening for the UI on %s: %w", addr, err)
	}
	// Requests' contexts end with the server's, so that live streams
	// end on Close.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
		hs: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			BaseContext:       func(net.Listener) context.Context { return base },
		},
		addr:   l.Addr(),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && cfg.Log != nil {
			cfg.Log.Warn("ui: serving", logattr.Error, err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// URL is the server's address as a URL: http://127.0.0.1:8233.
func (s *Server) URL() string { return "http://" + s.addr.String() }

// Close stops the server: it ends live streams, lets other requests
// finish for up to 5 seconds, and waits for it to stop. It is idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.hs.Shutdown(ctx); err != nil {
			_ = s.hs.Close()
		}
		<-s.done
	})
}
