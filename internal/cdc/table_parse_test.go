package cdc

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseTableIDQuoting(t *testing.T) {
	for _, c := range []struct {
		in           string
		schema, name string
		err          string
	}{
		{"public.orders", "public", "orders", ""},
		{"public.Orders", "public", "Orders", ""}, // unquoted: as written, not folded
		{`public."Order Items"`, "public", "Order Items", ""},
		{`"my.schema"."a.b"`, "my.schema", "a.b", ""},
		{`public."say ""hi"""`, "public", `say "hi"`, ""},
		{`public."trailing "`, "public", "trailing ", ""},
		{"orders", "", "", "want a schema-qualified name"},
		{"a.b.c", "", "", "want a schema-qualified name"},
		{"public.", "", "", "an empty part"},
		{`public."open`, "", "", "not closed"},
		{`public.Order" Items"`, "", "", "quote inside an unquoted name"},
		{`public."a"b`, "", "", "followed by . or the end"},
		{`public.""`, "", "", "an empty part"},
	} {
		id, err := ParseTableID(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), strconv.Quote(c.in)) {
				t.Errorf("%s: %v, want an error naming it with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || id.Schema != c.schema || id.Name != c.name {
			t.Errorf("%s: %+v %v, want %q.%q", c.in, id, err, c.schema, c.name)
		}
	}
	if s, tb, col, err := ParseColumnRef(`public."Order Items"."unit price"`); err != nil || s != "public" || tb != "Order Items" || col != "unit price" {
		t.Errorf("column ref: %q %q %q %v", s, tb, col, err)
	}
}

// Any two names, quoted as PostgreSQL quotes them, parse back to
// themselves.
func FuzzParseTableID(f *testing.F) {
	f.Add("public", "orders")
	f.Add("my.schema", `a "b" c`)
	f.Fuzz(func(t *testing.T, schema, name string) {
		quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
		id, err := ParseTableID(quote(schema) + "." + quote(name))
		if schema == "" || name == "" {
			if err == nil {
				t.Errorf("empty part accepted: %+v", id)
			}
			return
		}
		if err != nil || id.Schema != schema || id.Name != name {
			t.Errorf("%q.%q: %+v %v", schema, name, id, err)
		}
	})
}

func TestQuoted(t *testing.T) {
	for id, want := range map[TableID]string{
		{"public", "orders"}:      "public.orders",
		{"public", "Order Items"}: `public."Order Items"`,
		{"public", "trailing "}:   `public."trailing "`,
		{"my.schema", `say "hi"`}: `"my.schema"."say ""hi"""`,
		{"app", "_t1$"}:           "app._t1$",
		{"app", "1st"}:            `app."1st"`,
	} {
		if got := id.Quoted(); got != want {
			t.Errorf("%+v.Quoted() = %s, want %s", id, got, want)
		}
		if back, err := ParseTableID(id.Quoted()); err != nil || back != id {
			t.Errorf("%s parses back as %+v, %v", id.Quoted(), back, err)
		}
	}
}
