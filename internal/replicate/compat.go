package replicate

import (
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// checkRecordedTypes refuses to write a table whose columns this build
// would map to other Parquet types than the manifest records (for example a
// sink initialised by a version that stored arrays as text). Deltas must use
// the types of the base and of every earlier delta, or readers that merge
// them see a column change type between files.
func (b *binder) checkRecordedTypes(t *cdc.Table, sc *parquetfile.Schema) error {
	mt := b.manifest().Tables[t.ID.String()]
	if mt == nil {
		return nil
	}
	// By field id and source type: a column keeps its Parquet type in every
	// version that has it with that type (a type change is the same field
	// with another type).
	type field struct {
		id      int
		typ     uint32
		typmod  int32
		repr    string
		hasElem bool
	}
	recorded := map[field]manifest.Column{}
	for _, sv := range mt.Schemas {
		for _, c := range sv.Columns {
			recorded[field{c.FieldID, c.TypeOID, c.TypeMod, c.Representation, c.ElementTypeOID != 0}] = c
		}
	}
	for i, tc := range t.Columns {
		c, ok := recorded[field{tc.FieldID, tc.TypeOID, tc.TypeMod, tc.Repr, tc.ElemTypeOID != 0}]
		if !ok || tc.FieldID == 0 {
			continue
		}
		if got := sc.ParquetType(i); c.ParquetType != "" && got != c.ParquetType {
			return &cdc.Error{
				Class: cdc.ErrSchemaChanged,
				Msg: fmt.Sprintf("table %s column %q: the manifest records Parquet type %s, this version writes %s",
					t.ID, c.Name, c.ParquetType, got),
				Hint: "the sink was initialised by another version of pg-cdc with another type mapping; run the version that initialised it, or rebuild on a new storage path (docs/types.md)",
			}
		}
	}
	return nil
}
