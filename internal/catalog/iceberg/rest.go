package iceberg

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"time"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
)

// PropRequestTimeout is the one REST property pg-cdc reads itself (a Go
// duration, "30s"): how long a request to the catalog may wait for the
// answer's headers. iceberg-go's client has no timeout of its own, and the
// publisher's calls carry none (it follows the stream until it stops), so
// without one a catalog that never answers would hold the publisher.
const PropRequestTimeout = "pgcdc.request-timeout"

// DefaultRequestTimeout is PropRequestTimeout's default.
const DefaultRequestTimeout = time.Minute

// OpenREST opens the Iceberg REST catalog at uri (its base URI: the
// routes are under uri/v1) over the warehouse wh, and returns the
// adapter and the function that closes the catalog's connections. It asks
// the server for its configuration at once, so a catalog that is down or
// refuses the credentials fails here.
//
// props are the REST client's properties, as iceberg-go and the other
// Iceberg clients name them: token (a bearer token), credential
// (client_id:client_secret, exchanged at the OAuth2 endpoint), scope,
// audience, resource, oauth2-server-uri (default uri/v1/oauth/tokens),
// prefix, warehouse (what the server knows the warehouse by; default
// wh.Location), header.<name>, rest.sigv4-enabled and
// rest.signing-region/-name, rest.tls.skip-verify; iceberg-go's IO
// properties (s3.*, gcs.*), over wh's; and PropRequestTimeout. The tables'
// files are always addressed under wh.Location, the sink, whatever the
// server calls its warehouse. The server's configuration (its defaults
// and overrides) and credentials it vends for a table reach the IO too:
// iceberg-go merges them over the client's properties.
func OpenREST(ctx context.Context, uri string, wh Warehouse, props map[string]string) (*Adapter, func() error, error) {
	location := wh.Location
	timeout := DefaultRequestTimeout
	warehouse := location
	opts := []rest.Option{}
	extra := iceberg.Properties{}
	for k, v := range wh.IO {
		extra[k] = v
	}
	for k, v := range props {
		switch k {
		case "token":
			opts = append(opts, rest.WithOAuthToken(v))
		case "credential":
			opts = append(opts, rest.WithCredential(v))
		case "scope":
			opts = append(opts, rest.WithScope(v))
		case "audience":
			opts = append(opts, rest.WithAudience(v))
		case "resource":
			opts = append(opts, rest.WithResource(v))
		case "prefix":
			opts = append(opts, rest.WithPrefix(v))
		case "warehouse":
			warehouse = v
		case "oauth2-server-uri", "rest.authorization-url":
			u, err := url.Parse(v)
			if err != nil {
				return nil, nil, fmt.Errorf("iceberg REST catalog: property %s: %w", k, err)
			}
			opts = append(opts, rest.WithAuthURI(u))
		case PropRequestTimeout:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("iceberg REST catalog: property %s: %q is not a positive duration", k, v)
			}
			timeout = d
		case "uri", "type":
			return nil, nil, fmt.Errorf("iceberg REST catalog: property %s is OpenREST's to set", k)
		default:
			extra[k] = v // read by the client after the server's configuration is merged in
		}
	}
	opts = append(opts, rest.WithWarehouseLocation(warehouse), rest.WithAdditionalProps(extra),
		rest.WithTransportFactory(func(tc *tls.Config) (http.RoundTripper, func()) {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = tc
			t.ResponseHeaderTimeout = timeout
			return t, t.CloseIdleConnections
		}))
	cat, err := rest.NewCatalog(ctx, "pgcdc", uri, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg REST catalog %s: %w", redactURI(uri), err)
	}
	return NewIn(cat, wh), cat.Close, nil
}

// redactURI is uri without a password, for errors.
func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(an unparsable URI)"
	}
	return u.Redacted()
}
