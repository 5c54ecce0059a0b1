package middleware

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"example.com/groupmembership/internal/accesslog"

	"example.com/groupmembership/membership"
)

// observedWriter is the ResponseWriter every handler gets: it remembers the
// status written and what the access-log line needs to know from inside the
// handler. Handlers reach it through their ResponseWriter rather than the
// request's context, which would copy the request on every call.
type observedWriter struct {
	http.ResponseWriter
	status    int            // 0 until the header is written
	actingUID membership.UID // 0: the request named none
	// principal is the name the request was authenticated as
	// (Authenticated), "" for none.
	principal   string
	internalErr error
	// requestID holds the request's id, the X-Request-Id header's value:
	// held here, the header's slice costs no allocation of its own.
	requestID [1]string
	// clientClosed is set when the client went away before its reply: a
	// write failed, or the handler found its context cancelled.
	clientClosed bool
	// scratch holds the text of a request id made here and of the
	// numbers a reply is made of (its X-Revision, its Content-Length, a
	// count as its body), and fields the header values made of them, so
	// that they take no allocation of their own: the writer is allocated
	// once per request anyway. Each byte is written once, before the
	// string over it is made, and never again. What does not fit is made
	// in memory of its own.
	scratch     [48]byte
	fields      [2]string
	scratchUsed uint8
	fieldsUsed  uint8
}

// appendScratch returns what fill appends to an empty slice: in the
// writer's scratch when it fits there, else in memory of its own.
func (o *observedWriter) appendScratch(fill func([]byte) []byte) []byte {
	free := o.scratch[o.scratchUsed:o.scratchUsed:len(o.scratch)]
	b := fill(free)
	if len(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(free) { // it fitted: append did not move it
		o.scratchUsed += uint8(len(b))
		return b[:len(b):len(b)]
	}
	return b
}

// UintField returns v in decimal as a header value, in w's scratch when w
// is the request's observedWriter and it has room.
func UintField(w http.ResponseWriter, v uint64) []string {
	fill := func(b []byte) []byte { return strconv.AppendUint(b, v, 10) }
	o, ok := w.(*observedWriter)
	if !ok || int(o.fieldsUsed) == len(o.fields) {
		return []string{string(fill(nil))}
	}
	b := o.appendScratch(fill)
	i := o.fieldsUsed
	o.fields[i] = unsafe.String(unsafe.SliceData(b), len(b))
	o.fieldsUsed++
	return o.fields[i : i+1 : i+1] // no room to append: Header.Add copies
}

// CountBody returns n, not negative, in decimal as a reply's JSON body, in
// w's scratch when w is the request's observedWriter and it has room.
func CountBody(w http.ResponseWriter, n int) []byte {
	fill := func(b []byte) []byte { return strconv.AppendInt(b, int64(n), 10) }
	if o, ok := w.(*observedWriter); ok {
		return o.appendScratch(fill)
	}
	return fill(nil)
}

func (o *observedWriter) WriteHeader(status int) {
	if o.status == 0 {
		o.status = status
	}
	o.ResponseWriter.WriteHeader(status)
}

func (o *observedWriter) Write(b []byte) (int, error) {
	if o.status == 0 {
		o.status = http.StatusOK
	}
	n, err := o.ResponseWriter.Write(b)
	if err != nil {
		o.clientClosed = true
	}
	return n, err
}

// MarkClientClosed records that the client went away before its reply.
func MarkClientClosed(w http.ResponseWriter) {
	if o, ok := w.(*observedWriter); ok {
		o.clientClosed = true
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (o *observedWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// SetActingUID records the request's acting uid for the access log.
func SetActingUID(w http.ResponseWriter, uid membership.UID) {
	if o, ok := w.(*observedWriter); ok {
		o.actingUID = uid
	}
}

// RecordInternalError records err for the access log, which logs it with
// its detail at level error: WriteError's doing, and that of a handler
// that writes its own error bodies (SCIM's).
func RecordInternalError(w http.ResponseWriter, err error) {
	if o, ok := w.(*observedWriter); ok {
		o.internalErr = err
	}
}

var connectionClose = []string{"close"}

// Observe wraps next with request ids, the access log and panic recovery.
// Each request gets an id: the client's X-Request-ID when it is well formed,
// a new one otherwise, sent back in X-Request-ID. Each request gets one log
// line (method, path, status, duration, request id, principal, acting uid),
// never its credential, at level error
// with the detail when it failed on the service's side; a panic becomes a JSON
// 500 when nothing was written yet. Without accessLog, only the failed
// requests are logged. Each request is counted in m, unless m is nil.
func Observe(log RequestLog, accessLog bool, m *RequestMetrics, next http.Handler) http.Handler {
	ids := newRequestIDs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var id string
		if v := r.Header["X-Request-Id"]; len(v) > 0 { // the server canonicalized the name
			id = v[0]
		}
		ow := &observedWriter{ResponseWriter: w}
		if !wellFormedRequestID(id) {
			id = ids.next(ow)
		}
		ow.requestID[0] = id
		w.Header()["X-Request-Id"] = ow.requestID[:]
		if len(r.TransferEncoding) > 0 {
			// net/http reads a chunked body, and drops a Content-Length
			// sent with it, without a word; a proxy in front may have
			// read that Content-Length instead and see another request
			// after this one (RFC 9112 6.3, smuggling). Nothing that
			// follows a chunked body on its connection is read.
			w.Header()["Connection"] = connectionClose
		}
		if m != nil {
			m.inFlight.Add(1)
		}
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				err := fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				if ow.status == 0 {
					WriteError(ow, r, err)
				} else {
					RecordInternalError(ow, err)
				}
			}
			elapsed := time.Since(start)
			if m != nil {
				m.inFlight.Add(-1)
				m.record(r.Pattern, r.Method, ow.statusSent(), elapsed)
			}
			if accessLog || ow.internalErr != nil {
				log.request(r, start, elapsed, ow)
			}
			if p == http.ErrAbortHandler {
				panic(p) // net/http handles it: it aborts the response quietly
			}
		}()
		next.ServeHTTP(ow, r)
	})
}

// statusSent returns the status the client gets, or statusClientClosed when
// it went away before getting one.
func (o *observedWriter) statusSent() int {
	if o.clientClosed {
		return statusClientClosed
	}
	if o.status == 0 {
		return http.StatusOK // the handler wrote nothing: net/http sends 200
	}
	return o.status
}

// RequestLog writes the access log: through Lines when set, else through
// Logger, the same line either way.
type RequestLog struct {
	Logger *slog.Logger
	Lines  *accesslog.Logger
}

// request logs one request: method, path, status, duration, request id,
// the principal it was authenticated as and the acting uid when it has
// them, and the error when it failed on the service's side (then at level
// ERROR).
func (l RequestLog) request(r *http.Request, start time.Time, elapsed time.Duration, ow *observedWriter) {
	if l.Lines != nil {
		e := accesslog.Entry{
			Time: start.Add(elapsed), Method: r.Method, Path: r.URL.EscapedPath(), Status: ow.statusSent(),
			Duration: elapsed, RequestID: ow.requestID[0], Principal: ow.principal, UID: int64(ow.actingUID),
		}
		if ow.internalErr != nil {
			e.Err = ow.internalErr.Error()
		}
		l.Lines.Log(&e)
		return
	}
	logRequest(l.Logger, r, elapsed, ow)
}

func logRequest(logger *slog.Logger, r *http.Request, elapsed time.Duration, ow *observedWriter) {
	status := ow.statusSent()
	level := slog.LevelInfo
	if ow.internalErr != nil {
		level = slog.LevelError
	}
	if !logger.Enabled(r.Context(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("method", r.Method),
		slog.String("path", r.URL.EscapedPath()),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
		slog.String("request_id", ow.requestID[0]),
	)
	if ow.principal != "" {
		attrs = append(attrs, slog.String("principal", ow.principal))
	}
	if ow.actingUID != 0 {
		attrs = append(attrs, slog.Int64("uid", int64(ow.actingUID)))
	}
	if ow.internalErr != nil {
		attrs = append(attrs, slog.String("err", ow.internalErr.Error()))
	}
	logger.LogAttrs(r.Context(), level, "request", attrs...)
}

// maxRequestIDLen bounds the request ids taken from clients.
const maxRequestIDLen = 128

// wellFormedRequestID reports whether a client's request id can be kept: 1 to
// maxRequestIDLen characters of letters, digits and -._:, nothing that could
// break a log line.
func wellFormedRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == ':':
		default:
			return false
		}
	}
	return true
}

// requestIDs makes ids unique within this process and unlikely to repeat
// across processes: a random prefix drawn at start, and a counter.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

// next returns a new id, made in o's scratch.
func (ids *requestIDs) next(o *observedWriter) string {
	n := ids.n.Add(1)
	b := o.appendScratch(func(b []byte) []byte { return strconv.AppendUint(append(b, ids.prefix...), n, 10) })
	return unsafe.String(unsafe.SliceData(b), len(b))
}
