package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const secret = "Hunter2-s3cr3t/+&x"

func TestScrubPatterns(t *testing.T) {
	s := NewScrubber()
	for _, tc := range []struct{ in, want string }{
		{"postgres://app:pw0rd@db:5432/app?sslmode=require", "postgres://app:xxxxx@db:5432/app?sslmode=require"},
		{"open postgresql://app:p%40ss@10.0.0.1/app failed", "open postgresql://app:xxxxx@10.0.0.1/app failed"},
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"host=db user=app password=pw0rd dbname=app", "host=db user=app password=xxxxx dbname=app"},
		{"host=db password='a b\\'c' dbname=app", "host=db password=xxxxx dbname=app"},
		{"postgres://db/app?user=app&password=pw0rd&sslmode=disable", "postgres://db/app?user=app&password=xxxxx&sslmode=disable"},
		{"sslpassword=keypass", "sslpassword=xxxxx"},
		{"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Security-Token=FwoGZXIvYXdz&X-Amz-Signature=abcdef0123",
			"https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=xxxxx&X-Amz-Security-Token=xxxxx&X-Amz-Signature=xxxxx"},
		// An RDS IAM token is a presigned URL without its scheme.
		{"db.rds.amazonaws.com:5432/?Action=connect&DBUser=app&X-Amz-Signature=0f0f", "db.rds.amazonaws.com:5432/?Action=connect&DBUser=app&X-Amz-Signature=xxxxx"},
		{"Authorization: AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=beef", "Authorization: xxxxx"},
		{"header authorization=Bearer abc.def", "header authorization=xxxxx"},
		{"got Bearer eyJhbGciOi.x_y-z= back", "got Bearer xxxxx back"},
		{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY=xxxxx"},
		{"aws_session_token = FwoGZXIvYXdz", "aws_session_token = xxxxx"},
		{`{"password":"pw0rd","user":"app"}`, `{"password":"xxxxx","user":"app"}`},
		{"password: pw0rd", `password: "xxxxx"`},
		// Not secrets.
		{"FATAL: password authentication failed for user \"app\" (SQLSTATE 28P01)", "FATAL: password authentication failed for user \"app\" (SQLSTATE 28P01)"},
		{"slot=pg_cdc_slot lsn=0/16B3748 epoch=3", "slot=pg_cdc_slot lsn=0/16B3748 epoch=3"},
	} {
		if got := s.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if got := s.Scrub(s.Scrub(tc.in)); got != tc.want {
			t.Errorf("Scrub is not idempotent on %q: %q", tc.in, got)
		}
	}
}

func TestScrubKnownSecrets(t *testing.T) {
	s := NewScrubber(secret, "", "abc") // empty and short values are ignored
	for _, in := range []string{
		"the value " + secret + " leaked",
		"escaped Hunter2-s3cr3t%2F%2B%26x in a query",
		"escaped Hunter2-s3cr3t%2F+&x in a path",
		`{"err":"Hunter2-s3cr3t/+\u0026x"}`,
	} {
		got := s.Scrub(in)
		if strings.Contains(got, "Hunter2") {
			t.Errorf("Scrub(%q) = %q", in, got)
		}
	}
	if got := s.Scrub("abc is short"); got != "abc is short" {
		t.Errorf("a short secret was replaced: %q", got)
	}
	// A JSON line stays valid.
	line := `{"msg":"connect","err":"dial postgres://u:` + secret + `@h/db: refused","x":"a=\"b\""}`
	var v map[string]any
	if err := json.Unmarshal([]byte(NewScrubber().Scrub(line)), &v); err != nil {
		t.Errorf("scrubbed JSON does not parse: %v", err)
	}
}

type secretStruct struct{ Password string }

type stringer struct{}

func (stringer) String() string { return "postgres://u:" + secret + "@h/db" }

// TestHandlerScrubsEverything logs a secret in every place a record can
// hold one, through both of slog's handlers.
func TestHandlerScrubsEverything(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var inner slog.Handler = slog.NewTextHandler(&buf, opts)
			if format == "json" {
				inner = slog.NewJSONHandler(&buf, opts)
			}
			log := slog.New(NewHandler(inner, NewScrubber(secret)))
			url := "postgres://app:" + secret + "@db/app"
			log = log.With("url", url).WithGroup("g").With("dsn", "password="+secret)
			log.Debug("connecting to "+url,
				"err", fmt.Errorf("connect %s: %w", url, errors.New("refused")),
				"stringer", stringer{},
				"struct", secretStruct{Password: secret},
				"bytes", []byte(secret),
				slog.Group("inner", "token", secret, "n", 3),
				"lsn", "0/16B3748")
			out := buf.String()
			if strings.Contains(out, "Hunter2") {
				t.Fatalf("the secret is in the log:\n%s", out)
			}
			if !strings.Contains(out, "0/16B3748") || !strings.Contains(out, "xxxxx") {
				t.Fatalf("the record lost its clean values:\n%s", out)
			}
			if format == "json" {
				var v map[string]any
				if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, out)
				}
			}
		})
	}
}

// TestHandlerKeepsCleanValues: a value without a secret keeps its type.
func TestHandlerKeepsCleanValues(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), NewScrubber(secret)))
	log.Info("flushed", "rows", 12, "tables", []string{"public.a"}, "ok", true)
	if !strings.Contains(buf.String(), `"rows":12,"tables":["public.a"],"ok":true`) {
		t.Fatalf("clean values changed: %s", buf.String())
	}
}

func BenchmarkScrubCleanLine(b *testing.B) {
	s := NewScrubber(secret, "AKIAsecretkeyvalue")
	line := "flushed epoch epoch=12 reason=interval txns=326 rows=779 tables=4 bytes=41484 lsn=0/2576400"
	for b.Loop() {
		s.Scrub(line)
	}
}
