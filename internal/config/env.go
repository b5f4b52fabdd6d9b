package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// expand replaces ${NAME} in s with the value lookup gives for NAME and "$$"
// with a literal "$". An unset variable is an error (a set but empty one
// expands to ""), and so is any other "$": a bare $NAME or ${NAME:-default}
// would otherwise be kept literally and fail much later, far from its cause.
// Errors name the variable, never a value.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New(`unterminated "${" (write "$$" for a literal "$")`)
			}
			name := s[i+2 : i+2+end]
			if !validEnvName(name) {
				return "", fmt.Errorf("invalid variable reference ${%s}: want ${NAME} with letters, digits and _ (defaults like ${X:-y} are not supported)", truncate(name))
			}
			val, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(val)
			i += 2 + end
		default:
			return "", errors.New(`"$" must start ${NAME} or be doubled as "$$" for a literal "$"`)
		}
	}
	return b.String(), nil
}

// urlEnv is source.postgres.url's override variable.
const urlEnv = "PGCDC_SOURCE_POSTGRES_URL"

// ResolveURL returns the source URL for a new connection. When the file
// wrote the URL with ${VAR} references, they are expanded again with lookup
// (os.LookupEnv in pg-cdc), so a variable whose value changed since Load,
// such as a rotated password, takes effect on the next connection without a
// restart. Otherwise, and when URL was changed after Load or set by
// PGCDC_SOURCE_POSTGRES_URL (taken literally), it returns URL.
//
// Load has already checked that every referenced variable was set then; a
// variable unset since is an error that names it, never a value.
func (p PostgresConfig) ResolveURL(lookup func(string) (string, bool)) (string, error) {
	if p.urlTemplate == "" || p.URL != p.urlLoaded {
		return p.URL, nil
	}
	u, err := expand(p.urlTemplate, lookup)
	if err != nil {
		return "", fmt.Errorf("source.postgres.url: %w", err)
	}
	return u, nil
}

// mapLookup looks names up in env, as os.LookupEnv does in the process
// environment.
func mapLookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// nonConfigEnv lists the PGCDC_* variables that are read elsewhere and so
// are not unknown overrides.
func nonConfigEnv(name string) bool {
	switch name {
	case "PGCDC_FAILPOINTS", // internal/failpoint
		"PGCDC_CONFIG": // cmd/pg-cdc: the config file path
		return true
	}
	return false
}

// applyEnv applies PGCDC_* overrides on top of the file, recording in o
// which variable set each key (or that it failed). Values are taken
// literally (no ${VAR} expansion: the shell or the orchestrator has already
// done it). Every problem is returned, in variable-name order.
func applyEnv(c *Config, env map[string]string, o *origins) []*posError {
	byName := map[string]leaf{}
	var names []string
	for _, l := range leaves(c) {
		byName[l.envName()] = l
		names = append(names, l.envName())
	}
	var vars []string
	for k := range env {
		if strings.HasPrefix(k, envPrefix) && !nonConfigEnv(k) {
			vars = append(vars, k)
		}
	}
	sort.Strings(vars)
	var errs []*posError
	for _, name := range vars {
		l, ok := byName[name]
		if !ok {
			errs = append(errs, &posError{env: name, msg: fmt.Sprintf("environment variable %s: unknown pg-cdc setting%s", name, suggest(name, names))})
			continue
		}
		if err := setFromEnv(l, env[name]); err != nil {
			errs = append(errs, &posError{env: name, msg: fmt.Sprintf("environment variable %s (%s): %v", name, l.path, err), err: err})
			o.failed[l.path] = true
			continue
		}
		o.vars[l.path] = name
		delete(o.failed, l.path) // the file's bad value no longer counts
	}
	return errs
}

// setFromEnv parses one override. Lists are comma-separated with spaces
// around items trimmed; an empty value is an empty list, and an empty item
// ("a,,b", "a,") is an error because it is almost always a typo.
func setFromEnv(l leaf, val string) error {
	switch t := l.target.(type) {
	case *string:
		*t = val
	case *int:
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, strconv.IntSize)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", truncate(val))
		}
		*t = int(n)
	case *int64:
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", truncate(val))
		}
		*t = n
	case seconds:
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", truncate(val))
		}
		d, ok := secondsDuration(n)
		if !ok {
			return errors.New(secondsRangeError(n))
		}
		*t.d = d
	case *bool:
		switch strings.TrimSpace(val) {
		case "true":
			*t = true
		case "false":
			*t = false
		default:
			return fmt.Errorf("want true or false, got %q", truncate(val))
		}
	case *time.Duration:
		d, err := parseDuration(val)
		if err != nil {
			return err
		}
		*t = d
	case *[]string:
		if strings.TrimSpace(val) == "" {
			*t = []string{}
			return nil
		}
		items := strings.Split(val, ",")
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
			if items[i] == "" {
				return fmt.Errorf("item %d of the comma-separated list is empty", i)
			}
		}
		*t = items
	case *map[string]string:
		// "public.t.a=string,public.t.b=string"
		out := map[string]string{}
		if strings.TrimSpace(val) != "" {
			for i, item := range strings.Split(val, ",") {
				k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("item %d: want schema.table.column=representation, got %q", i, truncate(item))
				}
				out[k] = v
			}
		}
		*t = out
	default:
		return fmt.Errorf("unsupported field type %T", l.target)
	}
	return nil
}
