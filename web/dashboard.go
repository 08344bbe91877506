package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assetFS embed.FS

var assetFiles, _ = fs.Sub(assetFS, "assets")

// dashboard serves the common operating picture. Its data come from the API
// and the event stream; nothing is fetched from anywhere else.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, assetFiles, "index.html")
}

func (s *Server) assets() http.Handler {
	files := http.StripPrefix("/assets/", http.FileServerFS(assetFiles))
	return s.only("GET", func(w http.ResponseWriter, r *http.Request) {
		// One that is not there is answered as every error is, in JSON,
		// not with the file server's plain text.
		name := strings.TrimPrefix(r.URL.Path, "/assets/")
		if name == "" {
			name = "."
		}
		if _, err := fs.Stat(assetFiles, name); err != nil {
			writeError(w, http.StatusNotFound, "no such asset: %s", r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
