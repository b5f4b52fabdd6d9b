// Package config turns a YAML file and the process environment into the
// plain structs that cmd/pg-cdc uses to build every other component. Only
// cmd imports it: the domain and the adapters receive plain values, never a
// Config, so that nothing below cmd knows where a setting came from.
//
// Invariants:
//
//   - Precedence is fixed: Default(), then the file, then PGCDC_* environment
//     overrides; Parse and Load validate the result before returning it.
//   - Nothing is silently ignored: an unknown key in the file, an unknown
//     PGCDC_* variable, a value of the wrong type, an unset ${VAR} and a
//     duplicated key are all errors. Each names the key (or variable) and,
//     for the file, the line, because a typo that does nothing is the worst
//     kind of configuration bug.
//   - Every mistake is reported at once: Parse joins the file's, the
//     overrides' and Validate's (a *FieldError each: key, value, problem),
//     each placed at the line or variable that set the value, in file
//     order. A key that failed to decode is not validated again.
//   - The *_sec keys are integer seconds in the file, the overrides and the
//     printed form, and time.Duration fields in Config (the seconds leaf
//     kind), so that no caller converts.
//   - Every leaf key has exactly one environment override, derived from its
//     path (flush.interval_sec → PGCDC_FLUSH_INTERVAL_SEC). The table of
//     leaves in leaves.go is the single list the file walker, the overrides
//     and the documentation test all read, so they cannot drift apart.
//   - ${VAR} is expanded at load, and every referenced variable must be set
//     then. The source URL alone also keeps the text the file wrote, so that
//     PostgresConfig.ResolveURL can expand it again for each connection.
//   - Secrets never appear in an error: errors about the source URL name the
//     key and the problem, never the value. Redacted() is the form to print.
//
// The keys, their defaults and their environment variables are documented
// in docs/configuration.md; a test checks that every key appears there.
package config
