package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// Resource URIs.
const (
	manifestURI        = "pgcdc://manifest"
	tablesURI          = "pgcdc://tables"
	tableSchemaPrefix  = "pgcdc://tables/"
	tableSchemaSuffix  = "/schema"
	tableSchemaPattern = "pgcdc://tables/{table}/schema"
)

// TableSchemaURI is the resource URI of a table's schema (key:
// schema.table).
func TableSchemaURI(key string) string {
	return tableSchemaPrefix + url.PathEscape(key) + tableSchemaSuffix
}

// TableSchema is the resource of one table's schema.
type TableSchema struct {
	Name            string              `json:"name"`
	View            string              `json:"view"`
	ChangesView     string              `json:"changes_view"`
	PrimaryKey      []string            `json:"primary_key"`
	ReplicaIdentity string              `json:"replica_identity"`
	SchemaVersion   int                 `json:"schema_version"`
	Columns         []ColumnInfo        `json:"columns"`
	ChangeColumns   []ResultColumn      `json:"change_columns"`
	SchemaVersions  []SchemaVersionInfo `json:"schema_versions"`
	Version         uint64              `json:"manifest_version"`
}

func (s *Server) addResources() {
	s.mcp.AddResource(&mcp.Resource{URI: manifestURI, Name: "manifest", Title: "Manifest summary", MIMEType: "application/json",
		Description: "The newest manifest version, summarised (what get_manifest returns without as_of)."}, s.readManifest)
	s.mcp.AddResource(&mcp.Resource{URI: tablesURI, Name: "tables", Title: "Tables", MIMEType: "application/json",
		Description: "The captured tables and the URIs of their schemas."}, s.readTables)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tableSchemaPattern, Name: "table-schema", Title: "Table schema", MIMEType: "application/json",
		Description: "One table's schema at the newest version: columns, field ids, primary key, every schema version; {table} is schema.table."}, s.readTableSchema)
}

func jsonContents(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (s *Server) readManifest(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	out, err := s.manifestSummary(ctx, AsOfInput{})
	if err != nil {
		return nil, err
	}
	return jsonContents(req.Params.URI, out)
}

// TableRef is one table in the tables resource.
type TableRef struct {
	Name      string `json:"name"`
	SchemaURI string `json:"schema_uri"`
}

func (s *Server) readTables(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	at, err := s.resolve(ctx, "")
	if err != nil {
		return nil, err
	}
	out := struct {
		Version uint64     `json:"manifest_version"`
		Tables  []TableRef `json:"tables"`
	}{Version: at.Version(), Tables: []TableRef{}}
	for _, t := range manifestSummary(at.Manifest) {
		out.Tables = append(out.Tables, TableRef{Name: t.Name, SchemaURI: TableSchemaURI(t.Name)})
	}
	access.RecordFrom(ctx).Rows = int64(len(out.Tables))
	return jsonContents(req.Params.URI, out)
}

func (s *Server) readTableSchema(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, ok := strings.CutPrefix(uri, tableSchemaPrefix)
	if ok {
		name, ok = strings.CutSuffix(name, tableSchemaSuffix)
	}
	if ok {
		var err error
		if name, err = url.PathUnescape(name); err != nil {
			ok = false
		}
	}
	if !ok || name == "" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	at, err := s.resolve(ctx, "")
	if err != nil {
		return nil, err
	}
	key, mt, err := lookupTable(at.Manifest, name)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", uri, err)
	}
	access.RecordFrom(ctx).Tables = []string{key}
	v, cv, err := s.views(ctx, at, key)
	if err != nil {
		return nil, err
	}
	var cols []ColumnInfo
	if cur := mt.CurrentSchema(); cur != nil {
		cols = columnInfos(cur.Columns)
	}
	return jsonContents(uri, TableSchema{Name: key, View: v, ChangesView: cv, PrimaryKey: nonNil(mt.PrimaryKey), ReplicaIdentity: mt.ReplicaIdentity,
		SchemaVersion: mt.SchemaVersion, Columns: nonNil(cols), ChangeColumns: changeColumns, SchemaVersions: schemaVersions(mt), Version: at.Version()})
}
