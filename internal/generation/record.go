package generation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// RecordKey is the key of generation gen's record (design.md §2).
func RecordKey(gen string) string {
	return "_pgcdc/generations/" + manifest.EscapeKeyElement(gen) + ".json"
}

// Record is what _pgcdc/generations/<gen>.json says of a generation once
// the manifest switched to it: why and how it was built, and what its
// validation compared. It is informational: the manifest alone says which
// files make up a table.
type Record struct {
	Generation string `json:"generation"`
	// Command built it ("rebuild"), Reason says why (the old slot's state).
	Command string `json:"command"`
	Reason  string `json:"reason"`
	// SwitchedAt and Epoch are the manifest write that switched to it.
	SwitchedAt time.Time `json:"switched_at"`
	Epoch      uint64    `json:"epoch"`
	// ConsistentPoint is the slot's LSN the copy was taken at.
	ConsistentPoint cdc.LSN         `json:"consistent_point"`
	Source          manifest.Source `json:"source"`
	// Previous is each table's generation before the switch (absent for a
	// table new to the manifest).
	Previous map[string]string      `json:"previous,omitempty"`
	Tables   map[string]RecordTable `json:"tables"`
}

// RecordTable is one table's validation (Check).
type RecordTable struct {
	Rows    int64 `json:"rows"`
	Files   int   `json:"files"`
	Sampled int   `json:"sampled"`
	// Rewritten: truncated or rewritten after the snapshot, so not
	// compared with the source (Check.Rewritten).
	Rewritten bool `json:"rewritten,omitempty"`
}

// WriteRecord stores r under RecordKey, replacing a record of an earlier
// attempt at the same generation.
func WriteRecord(ctx context.Context, store blob.Store, r Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("generation record %s: %w", r.Generation, err)
	}
	if err := store.Put(ctx, RecordKey(r.Generation), bytes.NewReader(append(data, '\n'))); err != nil {
		return fmt.Errorf("generation record %s: %w", r.Generation, err)
	}
	return nil
}
