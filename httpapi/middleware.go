package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"example.com/groupmembership/membership"
)

// requestInfo collects what the access-log line needs to know from inside
// the handler.
type requestInfo struct {
	actingUID   membership.UID // 0: the request named none
	internalErr error
}

type requestInfoKey struct{}

func setActingUID(ctx context.Context, uid membership.UID) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		info.actingUID = uid
	}
}

func recordInternalError(ctx context.Context, err error) {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		info.internalErr = err
	}
}

// observe wraps next with the access log and panic recovery: each request gets
// one log line (method, path, status, duration, acting uid), at level error
// with the detail when it failed on the service's side; a panic becomes a JSON
// 500 when nothing was written yet.
func observe(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				err := fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				if rec.status == 0 {
					writeError(rec, r, err)
				} else {
					recordInternalError(r.Context(), err)
				}
			}
			logRequest(logger, r, rec.status, time.Since(start), info)
			if p == http.ErrAbortHandler {
				panic(p) // net/http handles it: it aborts the response quietly
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

func logRequest(logger *slog.Logger, r *http.Request, status int, elapsed time.Duration, info *requestInfo) {
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http sends 200
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.EscapedPath()),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
	}
	if info.actingUID != 0 {
		attrs = append(attrs, slog.Int64("uid", int64(info.actingUID)))
	}
	level := slog.LevelInfo
	if info.internalErr != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", info.internalErr.Error()))
	}
	logger.LogAttrs(r.Context(), level, "request", attrs...)
}

// statusRecorder remembers the status a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	status int // 0 until the header is written
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
