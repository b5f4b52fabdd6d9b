package iceberg

import "testing"

// Expiry deletes only .avro files directly in the table's metadata
// directory: never a data file, a position delete file, or anything a
// path leads out of it to.
func TestMetaDirName(t *testing.T) {
	d, err := metadataDir("file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/snap-1-1-u.avro":       "snap-1-1-u.avro",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro":             "u-m0.avro",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/00001-u.metadata.json": "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/sub/u-m0.avro":         "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/../deletes/1-x.avro":   "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/deletes/1-x.parquet":            "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/.avro":                 "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata":                       "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t2/metadata/u-m0.avro":            "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata2/u-m0.avro":            "",
		"file:///srv/sink/public/t/g0001/delta/00000001/part-00000.parquet":                       "",
		"file://other/srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro":        "",
		"s3://srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro":                "",
		"/srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro":                    "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro?x=1":         "",
		"":  "",
		"%": "",
	} {
		if got := d.name(p); got != want {
			t.Errorf("name(%q) = %q, want %q", p, got, want)
		}
	}
	if got := d.file("u-m0.avro"); got != "file:///srv/sink/_pgcdc/iceberg/pgcdc_changelog/public/t/metadata/u-m0.avro" {
		t.Errorf("file: %s", got)
	}
	// A mixed-case table's escaped location: the files iceberg-go names
	// under it are recognised.
	d, err = metadataDir("file:///srv/sink/_pgcdc/iceberg/pgcdc/public/%4Frders")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.name(d.file("u-m0.avro")); got != "u-m0.avro" {
		t.Errorf("escaped location: name(%s) = %q", d.file("u-m0.avro"), got)
	}
}

// Of the position delete files, expiry deletes only .parquet files
// directly in the deletes directory writePositionDeletes writes in, and
// none of a table whose location holds an escape (its IO would address
// another directory than the one written).
func TestDeletesDirName(t *testing.T) {
	d := deletesDir("file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t")
	for p, want := range map[string]string{
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/12-sq0vy2hs.parquet": "12-sq0vy2hs.parquet",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/.posdel-123":         "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/x.avro":              "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/sub/1-x.parquet":     "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/../1-x.parquet":      "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/.parquet":            "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/metadata/1-x.parquet":        "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t/1-x.parquet":                 "",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/t2/deletes/1-x.parquet":        "",
		"file:///srv/sink/public/t/g0001/base/00000001/part-00000.parquet":           "",
		"file:///srv/sink/public/t/deletes/1-x.parquet":                              "",
		"s3://srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/1-x.parquet":            "",
		"/srv/sink/_pgcdc/iceberg/pgcdc/public/t/deletes/1-x.parquet":                "",
	} {
		if got := d.name(p); got != want {
			t.Errorf("name(%q) = %q, want %q", p, got, want)
		}
	}
	d = deletesDir("file:///srv/sink/_pgcdc/iceberg/pgcdc/public/%4Frders")
	for _, p := range []string{
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/%4Frders/deletes/1-x.parquet",
		"file:///srv/sink/_pgcdc/iceberg/pgcdc/public/Orders/deletes/1-x.parquet",
	} {
		if got := d.name(p); got != "" {
			t.Errorf("escaped location: name(%q) = %q, want none", p, got)
		}
	}
}
