// Package logging keeps secrets out of what pg-cdc writes: a Scrubber
// replaces passwords, tokens and keys in text, and Handler wraps a
// slog.Handler so that every message and attribute value passes through one
// before it is encoded. It imports only the standard library.
//
// Invariants:
//
//   - Scrubbing is idempotent and never grows a secret: what it replaces is
//     replaced by Redacted ("xxxxx").
//   - Two layers: patterns that recognise where a secret sits (the password
//     of a URL's user info, a password= keyword, presigned-URL signature
//     parameters, an Authorization header, a Bearer token), and an explicit
//     list of known secret values (the resolved source password, the AWS
//     secret key and session token), replaced wherever they appear, also in
//     their URL- and JSON-escaped forms.
//   - The patterns stop at quotes and whitespace, so scrubbing an encoded JSON
//     line keeps it valid JSON.
package logging
