// Package embedded runs a NATS server with JetStream inside the process: the
// one-binary default of Weft (make demo) and the server of every test.
package embedded

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config says where the embedded server keeps its data and how it listens.
type Config struct {
	// StoreDir is JetStream's file storage directory.
	StoreDir string
	// Host and Port to listen on; Port -1 picks a free port, 0 the default
	// 4222. Host defaults to 127.0.0.1.
	Host string
	Port int
	// ServerName names the server (optional).
	ServerName string
	// MaxPayload is the largest message the server takes (default 8 MiB).
	MaxPayload int32
	// SyncAlways fsyncs every write to file storage before it is
	// acknowledged (the server's sync_interval: always); by default the
	// server syncs every 2 minutes.
	SyncAlways bool
	// Users, when given, are the only ones the server admits, each with
	// its permissions (Weft's roles: see pkg/weft's WithRoles); none
	// means no authorization.
	Users []*server.User
}

// Start starts the server and waits until it is ready for connections.
func Start(cfg Config) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: a store directory is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	}
	if cfg.SyncAlways {
		opts.SyncAlways = true
	}
	if cfg.MaxPayload > 0 {
		opts.MaxPayload = cfg.MaxPayload
	}
	opts.Users = cfg.Users
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready for connections after 30s")
	}
	return s, nil
}

// Stop shuts the server down and waits until it has stopped.
func Stop(s *server.Server) {
	if s == nil {
		return
	}
	s.Shutdown()
	s.WaitForShutdown()
}
