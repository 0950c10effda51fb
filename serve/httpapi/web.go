package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

// webFiles is the web page at GET / (plain HTML, JS and CSS: no build step, no CDN). It
// talks to the OpenAI API (create, list, retrieve, cancel, delete, content) and follows
// each unfinished job over the native event stream.
//
//go:embed web
var webFiles embed.FS

// registerWeb serves the page at GET / and its files under GET /web/. They are public (the
// page asks for the API token, when the server has one, and sends it on its API calls).
func (a *API) registerWeb(mux *http.ServeMux) {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	files := http.FileServerFS(sub)
	mux.Handle("GET /web/", http.StripPrefix("/web/", files))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, sub, "index.html")
	})
}
