package mcpserver

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Value is one cell of a row: any JSON value. Its schema names the six
// JSON types as alternatives, so a client sees what a cell can be (an
// empty schema, which accepts anything, is what the inspector's --strict
// lint flags).
type Value any

var valueSchema = &jsonschema.Schema{
	Description: "a cell: null, a boolean, a number, a string (decimals, uuids, times in RFC 3339 and a date's or timestamp's \"infinity\" and \"-infinity\", bytes as \\x-hex, integers beyond ±2^53), an array (lists, maps as key/value entries) or an object (structs, intervals)",
	AnyOf: []*jsonschema.Schema{
		{Type: "null"}, {Type: "boolean"}, {Type: "number"}, {Type: "string"},
		{Type: "array", Items: &jsonschema.Schema{Ref: "#/$defs/value"}},
		{Type: "object", AdditionalProperties: &jsonschema.Schema{Ref: "#/$defs/value"}},
	},
}

// schemaFor is the JSON schema of T as a tool declares it: inferred from
// the struct (jsonschema tags are descriptions), with a cell's schema for
// Value, and without the "null" the inference adds to every slice and
// pointer — the outputs never hold a null where a list or an object is
// declared (a nil is omitted or made empty), and the SDK's validation of
// every output holds them to it.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[Value](): {Ref: "#/$defs/value"},
	}})
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(T), err))
	}
	dropNull(s)
	if usesRef(s) {
		s.Defs = map[string]*jsonschema.Schema{"value": valueSchema}
	}
	return s
}

// dropNull rewrites every type union {"null", X} as X.
func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		s.Type = s.Types[0]
		if s.Type == "null" {
			s.Type = s.Types[1]
		}
		s.Types = nil
	}
	for _, p := range s.Properties {
		dropNull(p)
	}
	dropNull(s.Items)
	dropNull(s.AdditionalProperties)
	for _, d := range s.Defs {
		dropNull(d)
	}
}

func usesRef(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if s.Ref != "" {
		return true
	}
	for _, p := range s.Properties {
		if usesRef(p) {
			return true
		}
	}
	return usesRef(s.Items) || usesRef(s.AdditionalProperties)
}

// toolHandler is a tool's body: typed input to typed output or an error
// worded for the caller.
type toolHandler[In, Out any] func(ctx context.Context, in In) (Out, error)

// addTool registers a read-only tool with its inferred schemas.
func addTool[In, Out any](s *Server, name, title, description string, h toolHandler[In, Out]) {
	closed := false
	t := &mcp.Tool{
		Name: name, Title: title, Description: description,
		InputSchema: schemaFor[In](), OutputSchema: schemaFor[Out](),
		Annotations: &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed},
	}
	mcp.AddTool(s.mcp, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, err := h(ctx, in)
		return nil, out, err
	})
}
