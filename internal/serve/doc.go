// Package serve is the read path's HTTP server (design.md §11.7): one
// listener for REST under /v1, MCP over streamable HTTP at /mcp, /metrics,
// /livez and /readyz. The handlers of the surfaces come from their own
// packages (internal/api, internal/mcpserver), which reach the engine
// through ports; this package owns what every request goes through, in this
// order:
//
//  1. the server's limits: header, read, write and idle timeouts, a header
//     size cap, and a body cap (Options.MaxBodyBytes, 1 MiB) that answers
//     413 past it;
//  2. authentication: a bearer token, hashed (SHA-256) and compared in
//     constant time against every configured hash, names the principal;
//     without one, 401. A server with no tokens serves anonymously, and
//     only on a loopback address: New refuses any other bind without
//     tokens. /livez and /readyz need no token. Tokens are never logged.
//     Failures are rate-limited per remote address (its IP, an IPv6
//     address's /64; never a header): past the limit, 429 before the
//     token is looked at. The addresses remembered are bounded (an LRU of
//     Options.MaxPeers), so memory stays flat whatever the flood;
//  3. a rate limit per principal (a token bucket keyed by the
//     authenticated principal's name, never by anything the client
//     chooses; the principals are the configured tokens, so memory is
//     bounded): 429 with Retry-After;
//  4. a cap on concurrent requests to the surfaces (each may run a query):
//     a request waits briefly for a slot, then gets 503 with Retry-After;
//  5. one audit record per REST request (access.Record, filled in by the
//     handler; the MCP server writes one per tool call itself), a
//     query's SQL in it as Options.HashSQL says.
//
// Around all of it, every refusal (401, 403, 413, 429, 503) of a route
// but the probes is counted by surface and code (Observer.Refused) and
// logged at warn, sampled per remote address and code (refusals.go).
//
// Errors of this layer are RFC 9457 problem documents with stable codes,
// like the REST API's.
package serve
