package ui

import (
	"bytes"
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// dist holds the front end's build (make ui); placeholder.html is served
// in its place when it has no index.html.
//
//go:embed all:dist placeholder.html
var embedded embed.FS

// loadFiles sets the files served: files, or the embedded build.
func (s *server) loadFiles(files fs.FS) error {
	if files == nil {
		sub, err := fs.Sub(embedded, "dist")
		if err != nil {
			return err
		}
		files = sub
	}
	s.files = files
	index, err := fs.ReadFile(files, "index.html")
	if errors.Is(err, fs.ErrNotExist) {
		index, err = embedded.ReadFile("placeholder.html")
	}
	if err != nil {
		return err
	}
	s.index = index
	return nil
}

// static serves the front end's files; any other path that is not an
// asset gets index.html, for the page's own routes (/runs/ID).
func (s *server) static(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name != "" && name != "index.html" && !hidden(name) {
		if f, err := s.files.Open(name); err == nil {
			st, err := f.Stat()
			_ = f.Close()
			if err == nil && !st.IsDir() {
				if strings.HasPrefix(name, "assets/") {
					// Built assets have content hashes in their names.
					w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
				}
				http.ServeFileFS(w, r, s.files, name)
				return
			}
		}
		if strings.HasPrefix(name, "assets/") {
			http.NotFound(w, r)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(s.index))
}

// hidden says whether a path names a file that is not the front end's:
// dot files and the build directory's README.
func hidden(name string) bool {
	base := path.Base(name)
	return strings.HasPrefix(base, ".") || name == "README"
}
