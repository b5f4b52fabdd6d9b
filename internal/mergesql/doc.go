// Package mergesql writes the merge rules of design.md §7 as DuckDB SQL, from
// one version of a table's manifest entry: the table's current state (the
// newest version of each key, after the last truncate, deletes left out,
// unchanged TOAST values taken from the key's newest earlier version), and
// its change rows with the metadata columns. The read path (internal/query)
// defines them as views; no other package writes merge SQL, and a
// differential test holds it against internal/merge, the streaming-side
// implementation of the same rules.
//
// Every file is read in the table's newest schema version, mapped by field
// id exactly as internal/merge maps it: a column the file's version has
// under another name is read under that name (a rename), one it has with
// another type is cast (integer widening, integers and text to text: the
// only type changes the stream follows), and one it lacks reads the value
// the rows written before it existed read in PostgreSQL (its recorded
// missing value, converted by internal/parquetfile as the writer converts
// it), or NULL.
//
// The package builds strings only: it imports no DuckDB and runs nothing.
package mergesql
