package main

import (
	"fmt"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// incompleteTables splits ids into the tables whose snapshot is complete
// and a description of each of the others ("public.t3 (backfilling 250 /
// ~1000 (25%))"). Until a table's snapshot is complete its merged state is
// partial (DESIGN §5: readers are told), so dump and verify refuse it
// rather than report part of a table as the whole.
func incompleteTables(m *manifest.Manifest, ids []cdc.TableID) (complete []cdc.TableID, incomplete []string) {
	for _, id := range ids {
		t := m.Tables[id.String()]
		if t == nil || t.Snapshot.Complete() {
			complete = append(complete, id)
			continue
		}
		incomplete = append(incomplete, fmt.Sprintf("%s (%s)", id, snapshotColumn(t.Snapshot)))
	}
	return complete, incomplete
}

// incompleteError is the refusal: exit 18, the class of "not initialized",
// since these tables are not initialized yet in the sink.
func incompleteError(incomplete []string) error {
	noun := "table's snapshot is"
	if len(incomplete) > 1 {
		noun = "tables' snapshots are"
	}
	return &cdc.Error{
		Class: cdc.ErrNotInitialized,
		Msg:   fmt.Sprintf("the %s not complete, so the sink holds part of them only: %s", noun, strings.Join(incomplete, ", ")),
		Hint:  "'pg-cdc start' completes them as backfills ('pg-cdc status' shows progress); --allow-incomplete reads them anyway",
	}
}
