package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header; the scheme is
// case-insensitive (RFC 7235) and surrounding blanks are ignored. bearerToken is pure.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokenMatches compares the request's bearer token with want in constant time.
func tokenMatches(header, want string) bool {
	got, ok := bearerToken(header)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// ClientOf names a request's client for the queue's fair share: the digest of its API key
// when it presents one (clients that share a server through keys of their own are told
// apart), else the host of its remote address. ClientOf is pure.
func ClientOf(r *http.Request) string {
	if key, ok := bearerToken(r.Header.Get("Authorization")); ok {
		sum := sha256.Sum256([]byte(key))
		return "key:" + hex.EncodeToString(sum[:8])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// ErrNoRoute is a request for a path the server has no route for (404 no_route);
// ErrMethod one with a method the path does not take (405 method_not_allowed).
var (
	ErrNoRoute = errors.New("no such route")
	ErrMethod  = errors.New("method not allowed")
)

// jsonRouteErrors answers what mux has no handler for as JSON: 405 with Allow for a known
// path with another method, 404 no_route otherwise; in OpenAI's shape where oa (when not
// nil) answers the request's route (an OpenAI id or route under /v1/videos).
func jsonRouteErrors(mux *http.ServeMux, oa OpenAI) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := &headerCapture{header: http.Header{}}
		h.ServeHTTP(probe, r)
		err := ErrNoRoute
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			err = fmt.Errorf("%w: %s here (allowed: %s)", ErrMethod, r.Method, probe.header.Get("Allow"))
		}
		if oa != nil && oa.Route(r) {
			oa.Fail(w, err, "")
			return
		}
		st, code := ErrorStatus(err)
		writeError(w, st, code, err)
	})
}

// headerCapture records the status and headers a handler writes and drops its body.
type headerCapture struct {
	header http.Header
	status int
}

func (c *headerCapture) Header() http.Header { return c.header }
func (c *headerCapture) WriteHeader(st int) {
	if c.status == 0 {
		c.status = st
	}
}
func (c *headerCapture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}
