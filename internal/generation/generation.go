// Package generation builds and validates a table's next generation (design.md
// §8): a new lineage of files, loaded beside the current one under the next
// generation's prefix while readers keep the current one, checked against
// the source, then switched to in one conditional manifest write
// (manifest.SwitchGeneration). pg-cdc rebuild uses it for every table.
//
// Invariants:
//   - Field ids carry over: a column the table already had (same attnum)
//     keeps its field id in the next generation, and a column it did not
//     have takes an id above every id the table ever used, so a reader that
//     resolves columns by id (Iceberg) never confuses two columns.
//   - Validate reads the new files back from the sink, independently of the
//     code that wrote them, and compares them with the source as the
//     snapshot saw it; nothing is switched unless they agree.
package generation

import (
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// CarryFieldIDs gives t's columns (as discovered in the source: field id =
// attnum) the field ids prev's current schema version gave the same columns,
// and records each column's attnum. On the same upstream a column is the
// same when its attnum is (a rename keeps it); on another upstream
// (rebuild --accept-new-upstream) attnums mean nothing, and a column is the
// same when its name is. The others take new ids above prev.MaxFieldID(),
// in column order. With no prev (a table new to the manifest) the
// discovered ids stay. Call it before the snapshot: the ids are written into
// the Parquet files.
func CarryFieldIDs(prev *manifest.Table, t *cdc.Table, sameUpstream bool) {
	for i := range t.Columns {
		if t.Columns[i].AttNum == 0 {
			t.Columns[i].AttNum = t.Columns[i].FieldID
		}
	}
	if prev == nil {
		return
	}
	ids := map[string]int{}
	key := func(name string, attnum int) string {
		if sameUpstream {
			return fmt.Sprint(attnum)
		}
		return name
	}
	if sv := prev.CurrentSchema(); sv != nil {
		for _, c := range sv.Columns {
			attnum := c.AttNum
			if attnum == 0 && sv.Version == 1 {
				// Manifests written before schema evolution recorded no
				// attnum: a first version's field id is the attnum.
				attnum = c.FieldID
			}
			if attnum > 0 || !sameUpstream {
				ids[key(c.Name, attnum)] = c.FieldID
			}
		}
	}
	next := prev.MaxFieldID()
	for i := range t.Columns {
		c := &t.Columns[i]
		if id, ok := ids[key(c.Name, c.AttNum)]; ok {
			c.FieldID = id
			continue
		}
		next++
		c.FieldID = next
	}
}

// Table is the manifest entry of t's next generation gen: base (a snapshot
// at lsn, stamped with the switch epoch so that a reader asking for an
// earlier epoch does not see it), no deltas, and one schema version, t's
// columns, numbered after prev's versions (a version number never names two
// column lists of one table). prev is nil for a table new to the manifest.
func Table(prev *manifest.Table, t *cdc.Table, gen string, base *manifest.Base, lsn cdc.LSN, epoch uint64) (*manifest.Table, error) {
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, err
	}
	version := 1
	if prev != nil {
		for _, sv := range prev.Schemas {
			version = max(version, sv.Version+1)
		}
		version = max(version, prev.SchemaVersion+1)
	}
	pk := t.PrimaryKey
	if pk == nil {
		pk = []string{}
	}
	b := *base
	b.Epoch = epoch
	b.SchemaVersion = version
	return &manifest.Table{
		Schema: t.ID.Schema, Name: t.ID.Name, OID: t.OID, Generation: gen,
		PrimaryKey: pk, ReplicaIdentity: string(t.ReplicaIdentity),
		SchemaVersion: version,
		Schemas:       []manifest.SchemaVersion{{Version: version, FromEpoch: epoch, Columns: schema.ManifestColumns(t)}},
		Snapshot:      manifest.Snapshot{State: manifest.SnapshotComplete, LSN: lsn},
		Base:          &b,
		Deltas:        []manifest.Delta{},
	}, nil
}
