package httpapi

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/vdpp/vdpp/serve/job"
)

// storageErr is a store failure as the server reports it.
func storageErr(err error) error { return fmt.Errorf("%w: %w", job.ErrStorage, err) }

func TestBearerToken(t *testing.T) {
	for _, c := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer s3cret", "s3cret", true},
		{"bearer s3cret", "s3cret", true},
		{"BEARER   s3cret  ", "s3cret", true},
		{"Basic s3cret", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"", "", false},
		{"s3cret", "", false},
	} {
		tok, ok := bearerToken(c.header)
		if tok != c.token || ok != c.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", c.header, tok, ok, c.token, c.ok)
		}
	}
}

func TestStorageErrorStatus(t *testing.T) {
	full := storageErr(&fs.PathError{Op: "write", Path: "/secret/data/jobs/x", Err: syscall.ENOSPC})
	denied := storageErr(&fs.PathError{Op: "open", Path: "/secret/data/jobs/x", Err: syscall.EACCES})
	for _, c := range []struct {
		err  error
		st   int
		code string
	}{
		{full, 507, "insufficient_storage"},
		{denied, 503, "storage_unavailable"},
		{fmt.Errorf("wrapped: %w", denied), 503, "storage_unavailable"},
	} {
		st, code := ErrorStatus(c.err)
		if st != c.st || code != c.code {
			t.Errorf("ErrorStatus(%v) = %d %s, want %d %s", c.err, st, code, c.st, c.code)
		}
		if strings.Contains(PublicMessage(code), "/") {
			t.Errorf("public message %q names a path", PublicMessage(code))
		}
	}
}

// FuzzBearerToken: a token that parses has no blanks at its ends and parses back from
// "Bearer TOKEN"; a header without the scheme never parses.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x ", "Basic abc", "", "Bearer", " BEARER\tq"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("%q: token %q without ok", h, tok)
			}
			return
		}
		if tok == "" || tok != strings.TrimSpace(tok) {
			t.Fatalf("%q: token %q", h, tok)
		}
		if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(h)), "bearer ") {
			t.Fatalf("%q parsed without the Bearer scheme", h)
		}
		if back, ok := bearerToken("Bearer " + tok); !ok || back != tok {
			t.Fatalf("%q: token %q does not parse back (%q, %v)", h, tok, back, ok)
		}
	})
}
