package flush

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from what the code produces")

// An apply case is a directory under testdata/apply holding:
//
//	manifest.json  the manifest as the commit found it
//	epoch.json     the uploaded epoch (epochCase)
//	want.json      the manifest applyEpoch makes of it, or
//	want.err       the error it returns
//
// go test ./internal/flush -run TestApplyEpoch -update rewrites want.*.

// epochCase is epoch.json: an uploadedEpoch as data.
type epochCase struct {
	// About says what the case shows; the test ignores it.
	About         string       `json:"about"`
	Epoch         uint64       `json:"epoch"`
	EndLSN        cdc.LSN      `json:"end_lsn"`
	MaxCommitTime time.Time    `json:"max_commit_time"`
	FlushedAt     time.Time    `json:"flushed_at"`
	Schemas       []schemaCase `json:"schemas"`
	Labels        []labelCase  `json:"labels"`
	Deltas        []deltaCase  `json:"deltas"`
	Also          []alsoCase   `json:"also"`
}

type schemaCase struct {
	Table   string            `json:"table"`
	Version int               `json:"version"`
	Columns []manifest.Column `json:"columns"`
}

type labelCase struct {
	Table   string   `json:"table"`
	Version int      `json:"version"`
	FieldID int      `json:"field_id"`
	Labels  []string `json:"labels"`
}

type deltaCase struct {
	Table            string           `json:"table"`
	Generation       string           `json:"generation"`
	SchemaVersion    int              `json:"schema_version"`
	Key              string           `json:"key"`
	Rows             int64            `json:"rows"`
	Bytes            int64            `json:"bytes"`
	MinLSN           cdc.LSN          `json:"min_lsn"`
	MaxLSN           cdc.LSN          `json:"max_lsn"`
	Adjusted         map[string]int64 `json:"adjusted"`
	UnrecoveredTOAST map[string]int64 `json:"unrecovered_toast"`
}

// alsoCase is one Also edit: the snapshot progress a backfill chunk
// commits with its epoch, or an edit that fails.
type alsoCase struct {
	Table    string             `json:"table"`
	Snapshot *manifest.Snapshot `json:"snapshot"`
	Fail     string             `json:"fail"`
}

func tableID(t *testing.T, s string) cdc.TableID {
	t.Helper()
	id, err := cdc.ParseTableID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// uploaded turns the case into the epoch applyEpoch takes.
func (ec epochCase) uploaded(t *testing.T) *uploadedEpoch {
	t.Helper()
	u := &uploadedEpoch{Record: manifest.EpochRecord{Epoch: ec.Epoch, EndLSN: ec.EndLSN, MaxCommitTime: ec.MaxCommitTime, FlushedAt: ec.FlushedAt}}
	for _, s := range ec.Schemas {
		// Copies, so that each conversion is independent of the others.
		u.Schemas = append(u.Schemas, NewSchema{Table: tableID(t, s.Table), Version: s.Version, Columns: slices.Clone(s.Columns)})
	}
	for _, l := range ec.Labels {
		u.Labels = append(u.Labels, LabelUpdate{Table: tableID(t, l.Table), Version: l.Version, FieldID: l.FieldID, Labels: slices.Clone(l.Labels)})
	}
	for _, d := range ec.Deltas {
		u.Deltas = append(u.Deltas, uploadedDelta{
			Table: tableID(t, d.Table), Generation: d.Generation, SchemaVersion: d.SchemaVersion,
			Key: d.Key, Rows: d.Rows, Bytes: d.Bytes, MinLSN: d.MinLSN, MaxLSN: d.MaxLSN,
			Adjusted: d.Adjusted, UnrecoveredTOAST: d.UnrecoveredTOAST,
		})
	}
	for _, a := range ec.Also {
		u.Also = append(u.Also, a.edit())
	}
	return u
}

func (a alsoCase) edit() func(*manifest.Manifest) error {
	return func(m *manifest.Manifest) error {
		if a.Fail != "" {
			return errors.New(a.Fail)
		}
		mt := m.Tables[a.Table]
		if mt == nil {
			return errors.New("backfill of " + a.Table + ": the table vanished from the manifest")
		}
		if a.Snapshot != nil {
			mt.Snapshot = *a.Snapshot
		}
		return nil
	}
}

func readManifest(t *testing.T, path string) *manifest.Manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// applyCase applies the case in dir to a fresh copy of its manifest and
// returns the result: the manifest's encoding, or the error's text.
func applyCase(t *testing.T, dir string, u *uploadedEpoch) (out []byte, failed bool) {
	t.Helper()
	m := readManifest(t, filepath.Join(dir, "manifest.json"))
	if err := applyEpoch(m, u); err != nil {
		return []byte(err.Error() + "\n"), true
	}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data, false
}

func TestApplyEpochGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "apply", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases under testdata/apply (%v)", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, "epoch.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ec epochCase
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ec); err != nil {
				t.Fatalf("epoch.json: %v", err)
			}
			u := ec.uploaded(t)
			got, failed := applyCase(t, dir, u)
			// Pure and deterministic: the same epoch applied again (as
			// after a CAS conflict) to the same manifest gives the same.
			if again, _ := applyCase(t, dir, u); !bytes.Equal(again, got) {
				t.Errorf("applying the epoch a second time gave another result:\n%s\n---\n%s", got, again)
			}
			// ... and the epoch itself is left as it was (Also, funcs,
			// cannot be compared).
			if fresh := ec.uploaded(t); !reflect.DeepEqual([]any{u.Record, u.Schemas, u.Labels, u.Deltas}, []any{fresh.Record, fresh.Schemas, fresh.Labels, fresh.Deltas}) {
				t.Errorf("applyEpoch modified the epoch:\n%+v\nwas\n%+v", u, fresh)
			}
			wantFile, staleFile := filepath.Join(dir, "want.json"), filepath.Join(dir, "want.err")
			if failed {
				wantFile, staleFile = staleFile, wantFile
			}
			if *update {
				if err := os.WriteFile(wantFile, got, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(staleFile); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("applyEpoch: %s (no %s: %v)", got, filepath.Base(wantFile), err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("applyEpoch result differs from %s (run with -update to accept it): %s\ngot:\n%s", wantFile, firstDiff(got, want), got)
			}
		})
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	return "no line differs"
}
