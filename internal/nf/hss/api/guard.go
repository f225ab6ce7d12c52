package api

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Guard protects the HSS's HTTP listener. Every request must name one of Hosts in its Host header (port
// ignored; this defeats DNS rebinding, where a web page reaches the API under the attacker's name). Requests
// under /api/ must carry "Authorization: Bearer <Token>", and their non-empty POST/PUT/PATCH bodies must be
// application/json (a web page can send text/plain cross-origin without a preflight). Other paths (/metrics,
// /healthz) need no token.
type Guard struct {
	Token string
	Hosts []string
	Log   *slog.Logger
}

// Protect wraps next with the guard's checks.
func (g Guard) Protect(next http.Handler) http.Handler {
	hosts := map[string]bool{}
	for _, h := range g.Hosts {
		if h = normHost(h); h != "" {
			hosts[h] = true
		}
	}
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	token := []byte(g.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, msg string) {
			log.Warn("http request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host,
				"remote", r.RemoteAddr, "status", status, "err", msg)
			writeError(w, status, msg)
		}
		if !hosts[normHost(r.Host)] {
			refuse(http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not served here", r.Host))
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(token) == 0 || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hss"`)
			refuse(http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			if r.ContentLength == 0 {
				break // nothing to decode: the handler answers 400 or 405
			}
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				refuse(http.StatusUnsupportedMediaType, "the body must be application/json")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// normHost is a Host header or host name without port, brackets, trailing dot and case.
func normHost(h string) string {
	h = strings.TrimSpace(h)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// LoadOrCreateToken reads the bearer token from path. A missing file is created with a random 256-bit token,
// mode 0600 (created reports it).
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", false, fmt.Errorf("api: token file %s is empty", path)
		}
		return t, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("api: token file: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("api: token: %w", err)
	}
	t := hex.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("api: token file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("api: token file: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", false, fmt.Errorf("api: token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("api: token file: %w", err)
	}
	return t, true, nil
}
