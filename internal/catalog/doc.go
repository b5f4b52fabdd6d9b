// Package catalog publishes the sink's committed manifest versions as
// Apache Iceberg (format v2) tables over the same Parquet files, beside the
// stream (design.md §12). It is the domain half: what each Iceberg table
// must hold after a manifest version (Plan), the record of what was
// published, kept in the Iceberg table itself so a restart resumes and a
// commit whose answer was lost is recognised (Published), and the
// Publisher that follows the post-commit seam. The Iceberg client is a port
// (Catalog); internal/catalog/iceberg adapts iceberg-go to it.
//
// The changelog table of a captured table holds its change rows as written:
// the snapshot base and every delta file, one Iceberg snapshot per
// published manifest version. A file leaves it, in an Iceberg commit, once
// it has been retired from the manifest for longer than history.retention;
// pg-cdc's garbage collection keeps retired files for history.retention
// plus catalog.iceberg.snapshot_max_age, so no retained Iceberg snapshot
// names a deleted file (Retention).
//
// Order of effects for one manifest version v and one table:
//
//  1. Load the Iceberg table (create it, then push pg-cdc's exact schema:
//     creating renumbers field ids). Its current snapshot's summary says
//     which manifest version it holds; at or past v, nothing to do.
//  2. Plan: the files to add (in v, not yet published) and to remove
//     (retired longer ago than the retention), and the schema when v's
//     differs.
//  3. Commit the schema and the files as one Iceberg commit whose summary
//     records v (pgcdc.manifest-version), its end LSN and commit time.
//     Both of a captured table's Iceberg tables are planned before either
//     commits; when both change and the catalog has multi-table commits
//     (Transactional: a REST catalog advertising them), their snapshots go
//     as one transaction, both or neither, a failed one retried whole by
//     planning again.
//  4. Expire snapshots older than snapshot_max_age (keeping the newest
//     snapshot_min_keep), then delete the manifest lists and manifests
//     only the expired snapshots named; never a data file: those are
//     pg-cdc's. A failed expiry or deletion does not fail the
//     publication; the next expiry retries it.
//
// A failure at any step leaves the table as step 1 will find it; the next
// attempt plans again from there.
package catalog
