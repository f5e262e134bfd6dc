package ui

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// gzipPool recycles the compressors of answers.
var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// compressed gzips an answer for a client that accepts it: a run's events
// repeat the same keys and values page after page, and shrink tenfold or
// more. Live streams are not compressed (each event must leave at once).
func compressed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(w)
		gw := &gzipWriter{ResponseWriter: w, zw: zw}
		next.ServeHTTP(gw, r)
		if gw.wrote {
			_ = zw.Close()
		}
		gzipPool.Put(zw)
	})
}

// acceptsGzip reads an Accept-Encoding header.
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}

// gzipWriter compresses what the handler writes.
type gzipWriter struct {
	http.ResponseWriter
	zw    *gzip.Writer
	wrote bool
}

func (g *gzipWriter) WriteHeader(status int) {
	if !g.wrote {
		g.wrote = true
		g.Header().Del("Content-Length")
		g.Header().Set("Content-Encoding", "gzip")
	}
	g.ResponseWriter.WriteHeader(status)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	return g.zw.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
