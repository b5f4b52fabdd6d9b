package logging

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
)

// Handler is a slog.Handler that scrubs the message and every attribute
// value (groups and the attributes of WithAttrs included) before the
// handler it wraps encodes them.
type Handler struct {
	next  slog.Handler
	scrub *Scrubber
}

// NewHandler wraps next.
func NewHandler(next slog.Handler, s *Scrubber) *Handler {
	return &Handler{next: next, scrub: s}
}

// Enabled reports whether the wrapped handler takes records of level l.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle scrubs r and passes it on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.scrub.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs scrubs attrs once, here, rather than on every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &Handler{next: h.next.WithAttrs(clean), scrub: h.scrub}
}

// WithGroup opens a group on the wrapped handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), scrub: h.scrub}
}

func (h *Handler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.scrub.Scrub(a.Value.String()))
	case slog.KindGroup:
		group := a.Value.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		a.Value = h.anyValue(a.Value)
	}
	return a
}

// anyValue renders an arbitrary value the way a handler would and, only
// when that text holds a secret, replaces the value with the scrubbed
// text. A clean value is passed on as it was, so the JSON handler still
// encodes it as its own type.
func (h *Handler) anyValue(v slog.Value) slog.Value {
	var text string
	switch x := v.Any().(type) {
	case error:
		text = x.Error()
	case fmt.Stringer:
		text = x.String()
	case encoding.TextMarshaler:
		b, err := x.MarshalText()
		if err != nil {
			return v
		}
		text = string(b)
	case []byte:
		text = string(x)
	default:
		text = fmt.Sprintf("%+v", x)
		// The JSON handler encodes the value with encoding/json, which
		// may show what the text form does not (a MarshalJSON, tags).
		if b, err := json.Marshal(x); err == nil && h.scrub.Scrub(string(b)) != string(b) {
			return slog.StringValue(h.scrub.Scrub(string(b)))
		}
	}
	if clean := h.scrub.Scrub(text); clean != text {
		return slog.StringValue(clean)
	}
	return v
}
