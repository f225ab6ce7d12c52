package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/nf/hss/store"
)

const (
	maxBodyBytes = 1 << 20 // request bodies are limited to 1 MiB
	defaultLimit = 100
	maxLimit     = 1000
)

type handler struct {
	db     *store.DB
	decode RestorationDecoder
}

// NewHandler returns the API:
//
//	GET    /api/v1/subscribers?after=&limit=     page through subscribers (limit default 100, max 1000)
//	POST   /api/v1/subscribers                   create (409 if the IMPI exists)
//	GET    /api/v1/subscribers/{impi}            one subscriber
//	PUT    /api/v1/subscribers/{impi}            create or replace
//	DELETE /api/v1/subscribers/{impi}            delete with its registration
//	GET    /api/v1/subscribers/{impi}/registration
//	GET    /api/v1/impus/{impu}/registration     impu URL-escaped
//
// Responses never contain a password or HA1. Errors are {"error": "..."}. Every request is logged once.
func NewHandler(db *store.DB, decode RestorationDecoder, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{db: db, decode: decode}
	routes := []struct {
		method, path string
		fn           http.HandlerFunc
	}{
		{http.MethodGet, "/api/v1/subscribers", h.list},
		{http.MethodPost, "/api/v1/subscribers", h.create},
		{http.MethodGet, "/api/v1/subscribers/{impi}", h.get},
		{http.MethodPut, "/api/v1/subscribers/{impi}", h.put},
		{http.MethodDelete, "/api/v1/subscribers/{impi}", h.delete},
		{http.MethodGet, "/api/v1/subscribers/{impi}/registration", h.registrationByIMPI},
		{http.MethodGet, "/api/v1/impus/{impu}/registration", h.registrationByIMPU},
	}
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	var paths []string
	for _, r := range routes {
		mux.HandleFunc(r.method+" "+r.path, r.fn)
		if _, seen := allowed[r.path]; !seen {
			paths = append(paths, r.path)
		}
		allowed[r.path] = append(allowed[r.path], r.method)
		if r.method == http.MethodGet {
			allowed[r.path] = append(allowed[r.path], http.MethodHead)
		}
	}
	// Patterns without a method are less specific than those with one, so they only catch the other methods;
	// "/" catches the rest. Both answer in JSON instead of ServeMux's plain text.
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed (allowed: %s)", r.Method, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	})
	return logRequests(mux, logger)
}

// subscriberJSON is a subscriber as the API shows it: never the password or HA1.
type subscriberJSON struct {
	IMPI                 string   `json:"impi"`
	IMPUs                []string `json:"impus"`
	Realm                string   `json:"realm"`
	AuthScheme           string   `json:"auth_scheme"`
	HasPassword          bool     `json:"has_password"`
	CapabilitySet        string   `json:"capability_set,omitempty"`
	UnregisteredServices bool     `json:"unregistered_services,omitempty"`
	VisitedNetworks      []string `json:"visited_networks,omitempty"`
	ServiceProfileXML    string   `json:"service_profile_xml,omitempty"`
}

func viewSubscriber(s store.Subscriber) subscriberJSON {
	return subscriberJSON{
		IMPI:                 s.IMPI,
		IMPUs:                s.IMPUs,
		Realm:                s.Realm,
		AuthScheme:           s.AuthScheme,
		HasPassword:          s.HA1 != "" || s.Password != "",
		CapabilitySet:        s.CapabilitySet,
		UnregisteredServices: s.UnregisteredServices,
		VisitedNetworks:      s.VisitedNetworks,
		ServiceProfileXML:    s.ServiceProfileXML,
	}
}

type listJSON struct {
	Subscribers []subscriberJSON `json:"subscribers"`
	Next        string           `json:"next"` // pass as after= for the next page; "" on the last page
	Total       int              `json:"total"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a positive integer", s))
			return
		}
		limit = min(n, maxLimit)
	}
	subs, err := h.db.ListSubscribers(q.Get("after"), limit+1) // one more tells whether there is a next page
	if err != nil {
		writeStoreError(w, err)
		return
	}
	total, err := h.db.CountSubscribers()
	if err != nil {
		writeStoreError(w, err)
		return
	}
	out := listJSON{Subscribers: make([]subscriberJSON, 0, min(len(subs), limit)), Total: total}
	if len(subs) > limit {
		subs = subs[:limit]
		out.Next = subs[limit-1].IMPI
	}
	for _, s := range subs {
		out.Subscribers = append(out.Subscribers, viewSubscriber(s))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	sub, err := h.db.GetSubscriber(r.PathValue("impi"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewSubscriber(sub))
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	sub, ok := readSubscriber(w, r)
	if !ok {
		return
	}
	if err := h.db.CreateSubscriber(r.Context(), sub); err != nil {
		writeStoreError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/subscribers/"+url.PathEscape(sub.IMPI))
	writeJSON(w, http.StatusCreated, viewSubscriber(normalized(sub)))
}

// put creates or replaces a subscriber. Without password or ha1 in the body an existing subscriber keeps its
// HA1, so a GET-edit-PUT round trip (responses never carry credentials) works; not across a realm change,
// because HA1 covers the realm.
func (h *handler) put(w http.ResponseWriter, r *http.Request) {
	impi := r.PathValue("impi")
	sub, ok := readSubscriber(w, r)
	if !ok {
		return
	}
	switch sub.IMPI {
	case "":
		sub.IMPI = impi
	case impi:
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("impi: %q in the body does not match %q in the URL", sub.IMPI, impi))
		return
	}
	if sub.Password == "" && sub.HA1 == "" {
		old, err := h.db.GetSubscriber(impi)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			writeStoreError(w, err)
			return
		case old.Realm != sub.Realm:
			writeError(w, http.StatusBadRequest, "password: required when the realm changes (HA1 covers the realm)")
			return
		default:
			sub.HA1 = old.HA1
		}
	}
	added, _, err := h.db.Import(r.Context(), []store.Subscriber{sub})
	if err != nil {
		writeStoreError(w, err)
		return
	}
	status := http.StatusOK
	if added > 0 {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/v1/subscribers/"+url.PathEscape(sub.IMPI))
	}
	writeJSON(w, status, viewSubscriber(normalized(sub)))
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	if err := h.db.DeleteSubscriber(r.Context(), r.PathValue("impi")); err != nil {
		writeStoreError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// registrationJSON is a user's registration as the HSS holds it.
type registrationJSON struct {
	IMPI             string         `json:"impi"`
	IMPUs            []string       `json:"impus"`
	State            store.RegState `json:"state"`
	ServerName       string         `json:"server_name"`
	AuthPending      string         `json:"auth_pending"`
	AuthPendingAt    time.Time      `json:"auth_pending_at,omitzero"`
	OriginHost       string         `json:"origin_host"`
	Restoration      any            `json:"restoration"`                 // decoded; base64 of the raw AVP without a decoder or when decoding fails; null when none
	RestorationError string         `json:"restoration_error,omitempty"` // why decoding failed
	RestorationAt    time.Time      `json:"restoration_at,omitzero"`
	RegisteredAt     time.Time      `json:"registered_at,omitzero"`
	UpdatedAt        time.Time      `json:"updated_at,omitzero"`
}

func (h *handler) registrationByIMPI(w http.ResponseWriter, r *http.Request) {
	sub, reg, err := h.db.GetSubscriberRegistration(r.PathValue("impi"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h.viewRegistration(sub, reg))
}

func (h *handler) registrationByIMPU(w http.ResponseWriter, r *http.Request) {
	sub, reg, err := h.db.LookupIMPURegistration(r.PathValue("impu"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h.viewRegistration(sub, reg))
}

func (h *handler) viewRegistration(sub store.Subscriber, reg store.Registration) registrationJSON {
	out := registrationJSON{
		IMPI:          sub.IMPI,
		IMPUs:         sub.IMPUs,
		State:         reg.State,
		ServerName:    reg.ServerName,
		AuthPending:   reg.AuthPending,
		AuthPendingAt: reg.AuthPendingAt,
		OriginHost:    reg.OriginHost,
		RestorationAt: reg.RestorationAt,
		RegisteredAt:  reg.RegisteredAt,
		UpdatedAt:     reg.UpdatedAt,
	}
	if len(reg.Restoration) == 0 {
		return out
	}
	out.Restoration = base64.StdEncoding.EncodeToString(reg.Restoration)
	if h.decode == nil {
		return out
	}
	decoded, err := h.decode(reg.Restoration)
	if err == nil {
		// Check here that it encodes, so a bad decoder shows up in restoration_error, not as a broken response.
		_, err = json.Marshal(decoded)
	}
	if err != nil {
		out.RestorationError = err.Error()
		return out
	}
	out.Restoration = decoded
	return out
}

// readSubscriber decodes the request body strictly (unknown fields, trailing data and bodies over 1 MiB are
// errors); on failure it has written the error response.
func readSubscriber(w http.ResponseWriter, r *http.Request) (store.Subscriber, bool) {
	var sub store.Subscriber
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(&sub)
	if err == nil {
		// Only whitespace may follow the object.
		if _, derr := dec.Token(); !errors.Is(derr, io.EOF) {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit))
		case errors.Is(err, io.EOF):
			writeError(w, http.StatusBadRequest, "request body: a JSON subscriber object is required")
		default:
			writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		}
		return store.Subscriber{}, false
	}
	return sub, true
}

// normalized is the subscriber as the store keeps it, for responses.
func normalized(s store.Subscriber) store.Subscriber {
	s.Normalize()
	return s
}

// writeStoreError maps store errors to HTTP statuses: the one place this package does so.
func writeStoreError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, store.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, store.ErrExists), errors.Is(err, store.ErrIMPUTaken):
		status = http.StatusConflict
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
	}
	writeError(w, status, err.Error())
}

type errorJSON struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	if rec, ok := w.(*recorder); ok {
		rec.err = msg
	}
	writeJSON(w, status, errorJSON{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep service_profile_xml readable
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, "{\"error\":%q}\n", "encode response: "+err.Error())
		if rec, ok := w.(*recorder); ok {
			rec.err = err.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// recorder remembers what the log line needs.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	err    string
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests writes one log line per request.
func logRequests(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Int("bytes", rec.bytes),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr),
		}
		// The mux has set the path values on r by now.
		if v := r.PathValue("impi"); v != "" {
			attrs = append(attrs, slog.String("impi", v))
		}
		if v := r.PathValue("impu"); v != "" {
			attrs = append(attrs, slog.String("impu", v))
		}
		if rec.err != "" {
			attrs = append(attrs, slog.String("err", rec.err))
		}
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelError
		}
		logger.LogAttrs(r.Context(), level, "api request", attrs...)
	})
}
