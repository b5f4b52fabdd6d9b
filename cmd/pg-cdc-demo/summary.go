package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// tableSummary is what the sink holds for one table, read from the
// manifest and from the Parquet files themselves.
type tableSummary struct {
	key            string
	snapshotRows   int64
	changes        opCounts // change rows in the deltas, by __op
	manifestRows   int64    // change rows according to the manifest
	deltaFiles     int
	epochs         int // deltas (one per epoch that touched the table)
	bytes          int64
	unchangedNote  int64 // U rows listing "note" in __unchanged
	sinkCurrent    int64 // rows in the current state: base + deltas merged
	sourceCurrent  int64 // count(*) at the source
	exampleFile    string
	exampleFileOps opCounts
}

// version is the newest change seen for one key.
type version struct {
	lsn, seq int64
	op       byte
}

func (v version) newer(o version) bool {
	return v.lsn > o.lsn || (v.lsn == o.lsn && v.seq > o.seq)
}

func (d *demo) summarize(ctx context.Context, stats *workStats) error {
	m, err := d.readManifest()
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return fmt.Errorf("connect to shop: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	store, err := fs.New(d.sink)
	if err != nil {
		return err
	}
	hist := manifest.NewHistory(store)
	var sums []*tableSummary
	for _, key := range sortedTables(m) {
		// The files major compactions folded: the manifest names them by
		// ranges (its folds), the history by version.
		folded, err := hist.Folded(ctx, key, 1, m.Version)
		if err != nil {
			return fmt.Errorf("table %s: the files compaction folded: %w", key, err)
		}
		s, err := d.summarizeTable(m.Tables[key], append(folded, m.Garbage...))
		if err != nil {
			return fmt.Errorf("table %s: %w", key, err)
		}
		id := m.Tables[key].ID()
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{id.Schema, id.Name}.Sanitize()).Scan(&s.sourceCurrent); err != nil {
			return fmt.Errorf("count %s at the source: %w", key, err)
		}
		sums = append(sums, s)
	}

	d.printf("Per table (change rows counted from the __op column of every delta file, those compaction folded included):\n\n")
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tsnapshot rows\tI\tU\tD\tT\tdelta files\tbytes\tcurrent rows: sink\tsource\t")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t\n", s.key, s.snapshotRows,
			s.changes.I, s.changes.U, s.changes.D, s.changes.T, s.deltaFiles, humanBytes(s.bytes), s.sinkCurrent, s.sourceCurrent)
	}
	tw.Flush()

	// Checks: the sink against what the workload committed and against the
	// source. Every problem is listed; any makes the demo fail.
	var problems []string
	d.printf("\nChecks:\n")
	for _, s := range sums {
		want := stats.expected(s.key)
		if s.changes != want {
			problems = append(problems, fmt.Sprintf("%s: the sink has change rows I %d U %d D %d T %d, the workload committed I %d U %d D %d T %d",
				s.key, s.changes.I, s.changes.U, s.changes.D, s.changes.T, want.I, want.U, want.D, want.T))
		}
		if s.changes.I+s.changes.U+s.changes.D+s.changes.T != s.manifestRows {
			problems = append(problems, fmt.Sprintf("%s: the delta files hold %d rows, the manifest says %d",
				s.key, s.changes.I+s.changes.U+s.changes.D+s.changes.T, s.manifestRows))
		}
		if s.sinkCurrent != s.sourceCurrent {
			problems = append(problems, fmt.Sprintf("%s: the sink's current state has %d rows, the source %d", s.key, s.sinkCurrent, s.sourceCurrent))
		}
		if s.key == "public.orders" && s.unchangedNote != stats.toastKept {
			problems = append(problems, fmt.Sprintf("public.orders: %d U rows list note in __unchanged, the workload made %d such updates", s.unchangedNote, stats.toastKept))
		}
	}
	if len(problems) == 0 {
		d.printf("  ✓ every committed change is in the sink: I/U/D/T rows per table equal what the workload committed\n")
		d.printf("    (a key change is a D and a U; the rolled-back transaction left nothing)\n")
		d.printf("  ✓ the current state (newest (__lsn, __seq) per key, after the last T) equals the source's row count for every table\n")
		d.printf("  ✓ %d updates of orders left the TOASTed note untouched, and exactly those rows list it in __unchanged\n", stats.toastKept)
	}
	for _, p := range problems {
		d.printf("  ✗ %s\n", p)
	}

	if err := d.printPositions(ctx, conn, m); err != nil {
		return err
	}
	d.printWhereToLook(m, sums)
	if len(problems) > 0 {
		return fmt.Errorf("the sink does not match what was committed at the source (%d problems above); this is a pg-cdc bug, please report it with %s", len(problems), d.rel(d.dir))
	}
	return nil
}

func (d *demo) readManifest() (*manifest.Manifest, error) {
	b, err := os.ReadFile(filepath.Join(d.sink, filepath.FromSlash(manifest.Key)))
	if err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	m, err := manifest.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	return m, nil
}

// summarizeTable reads every file of the table. It merges them into the
// current state by the rules of design.md §7: per key the newest version by
// (__lsn, __seq) wins, a D means gone, and a T marker removes every older
// version. A table without a primary key is insert-only: its current rows
// are the inserts after the last T.
//
// The change rows are counted over the table's deltas and over the delta
// files a major compaction folded since (start compacts by default), as
// the history names them. The inputs of a minor merge are not among them:
// the merged file holds their rows, so nothing is counted twice.
func (d *demo) summarizeTable(t *manifest.Table, retired []manifest.RetiredFile) (*tableSummary, error) {
	s := &tableSummary{key: t.ID().String()}
	newest := map[string]version{}
	var lastTruncate version
	var keyless []version // the rows of a table without a primary key
	visit := func(op byte, v version, key string, unchanged []string) {
		if op == 'T' {
			if v.newer(lastTruncate) {
				lastTruncate = v
			}
			return
		}
		if len(t.PrimaryKey) == 0 {
			keyless = append(keyless, v)
			return
		}
		if old, ok := newest[key]; !ok || v.newer(old) {
			newest[key] = v
		}
	}

	if t.Base != nil {
		s.snapshotRows = t.Base.RowCount
		for _, f := range t.Base.Files {
			s.bytes += f.Bytes
			if _, err := d.scanFile(f.Path, t.PrimaryKey, visit); err != nil {
				return nil, err
			}
		}
	}
	deltas := append([]manifest.Delta(nil), t.Deltas...)
	sort.Slice(deltas, func(i, j int) bool { return deltas[i].Epoch < deltas[j].Epoch })
	for _, delta := range deltas {
		s.epochs++
		s.manifestRows += delta.Rows
		for _, f := range delta.Files {
			s.deltaFiles++
			s.bytes += f.Bytes
			ops, err := d.scanFile(f.Path, t.PrimaryKey, func(op byte, v version, key string, unchanged []string) {
				if op == 'U' && contains(unchanged, "note") {
					s.unchangedNote++
				}
				visit(op, v, key, unchanged)
			})
			if err != nil {
				return nil, err
			}
			s.changes.add(ops)
			// The example is the file with the most kinds of change.
			if kinds(ops) > kinds(s.exampleFileOps) {
				s.exampleFile, s.exampleFileOps = f.Path, ops
			}
		}
	}
	deltaPrefix := strings.Join([]string{manifest.EscapeKeyElement(t.Schema), manifest.EscapeKeyElement(t.Name),
		manifest.EscapeKeyElement(t.Generation), string(manifest.KindDelta)}, "/") + "/"
	for _, g := range retired {
		if !strings.HasPrefix(g.Path, deltaPrefix) {
			continue
		}
		// Folded into the base already: its rows count as changes, not
		// again toward the current state.
		ops, err := d.scanFile(g.Path, t.PrimaryKey, func(op byte, _ version, _ string, unchanged []string) {
			if op == 'U' && contains(unchanged, "note") {
				s.unchangedNote++
			}
		})
		if err != nil {
			return nil, err
		}
		s.changes.add(ops)
		s.manifestRows += ops.I + ops.U + ops.D + ops.T
	}
	live := keyless
	for _, v := range newest {
		live = append(live, v)
	}
	for _, v := range live {
		if v.op != 'D' && v.newer(lastTruncate) {
			s.sinkCurrent++
		}
	}
	return s, nil
}

func kinds(c opCounts) int {
	n := 0
	for _, v := range []int64{c.I, c.U, c.D, c.T} {
		if v > 0 {
			n++
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scanFile reads one Parquet file of the sink (key relative to the sink
// root) with parquet-go and calls visit for each row with its __op,
// (__lsn, __seq), primary key and __unchanged list. It returns the rows
// counted by __op.
func (d *demo) scanFile(key string, pk []string, visit func(op byte, v version, key string, unchanged []string)) (opCounts, error) {
	var counts opCounts
	p := filepath.Join(d.sink, filepath.FromSlash(key))
	f, err := os.Open(p)
	if err != nil {
		return counts, fmt.Errorf("open %s: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return counts, fmt.Errorf("open %s: %w", key, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return counts, fmt.Errorf("open %s: %w", key, err)
	}
	col := func(name ...string) (int, error) {
		leaf, ok := pf.Schema().Lookup(name...)
		if !ok {
			return 0, fmt.Errorf("%s: no column %s", key, strings.Join(name, "."))
		}
		return leaf.ColumnIndex, nil
	}
	opCol, err := col("__op")
	if err != nil {
		return counts, err
	}
	lsnCol, err := col("__lsn")
	if err != nil {
		return counts, err
	}
	seqCol, err := col("__seq")
	if err != nil {
		return counts, err
	}
	unchangedCol, err := col("__unchanged", "list", "element")
	if err != nil {
		return counts, err
	}
	pkCols := make(map[int]int, len(pk)) // leaf column → position in the key
	for i, name := range pk {
		c, err := col(name)
		if err != nil {
			return counts, err
		}
		pkCols[c] = i
	}

	buf := make([]parquet.Row, 256)
	keyParts := make([]string, len(pk))
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				var op byte
				var v version
				var unchanged []string
				for _, val := range row {
					c := val.Column()
					switch {
					case c == opCol:
						if b := val.ByteArray(); len(b) == 1 {
							op = b[0]
						}
					case c == lsnCol:
						v.lsn = val.Int64()
					case c == seqCol:
						v.seq = val.Int64()
					case c == unchangedCol:
						if !val.IsNull() {
							unchanged = append(unchanged, val.String())
						}
					default:
						if i, ok := pkCols[c]; ok {
							keyParts[i] = val.String()
						}
					}
				}
				v.op = op
				switch op {
				case 'I':
					counts.I++
				case 'U':
					counts.U++
				case 'D':
					counts.D++
				case 'T':
					counts.T++
				default:
					rows.Close()
					return counts, fmt.Errorf("%s: a row with __op %q", key, op)
				}
				visit(op, v, strings.Join(keyParts, "\x00"), unchanged)
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				rows.Close()
				return counts, fmt.Errorf("read %s: %w", key, rerr)
			}
		}
		if err := rows.Close(); err != nil {
			return counts, fmt.Errorf("read %s: %w", key, err)
		}
	}
	return counts, nil
}

// printPositions compares the manifest's end LSN with the source's WAL and
// the slot's confirmed position.
func (d *demo) printPositions(ctx context.Context, conn *pgx.Conn, m *manifest.Manifest) error {
	var current string
	var lag int64
	err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, (pg_current_wal_lsn() - $1::pg_lsn)::bigint`, m.EndLSN.String()).Scan(&current, &lag)
	if err != nil {
		return fmt.Errorf("read the source's WAL position: %w", err)
	}
	var confirmedText, walStatus string
	var active bool
	err = conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, coalesce(wal_status, ''), active
		FROM pg_replication_slots WHERE slot_name = $1`, m.Source.Slot).Scan(&confirmedText, &walStatus, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("replication slot %q is gone", m.Source.Slot)
	}
	if err != nil {
		return fmt.Errorf("read the replication slot: %w", err)
	}
	confirmed, err := cdc.ParseLSN(confirmedText)
	if err != nil {
		return err
	}

	flushes := 0
	if b, err := os.ReadFile(d.logPath); err == nil {
		flushes = strings.Count(string(b), `msg="flushed epoch"`)
	}
	d.printf("\nPositions:\n")
	d.printf("  epochs:            %d (epoch 0 is the initial snapshot, then one per flush; %d \"flushed epoch\" lines in %s)\n",
		m.Epoch, flushes, d.rel(d.logPath))
	d.printf("  manifest end LSN:  %s (the last source transaction whose rows are in the sink)\n", m.EndLSN)
	d.printf("  source WAL now:    %s, %d bytes after the end LSN (WAL written since the last captured commit: records without\n", current, lag)
	d.printf("                     changes to the captured tables, e.g. checkpoints and autovacuum; the checks above show nothing is missing)\n")
	switch {
	case confirmed == m.EndLSN:
		d.printf("  slot confirmed:    %s = the manifest's end LSN: PostgreSQL was told exactly what is durable\n", confirmed)
	case confirmed < m.EndLSN:
		d.printf("  slot confirmed:    %s, %d bytes behind the manifest (safe: confirms lag the manifest)\n", confirmed, int64(m.EndLSN-confirmed))
	default:
		d.printf("  slot confirmed:    %s, AHEAD of the manifest's end LSN %s: pg-cdc confirmed more than it made durable\n", confirmed, m.EndLSN)
		return fmt.Errorf("the slot is confirmed at %s, past the manifest's end LSN %s", confirmed, m.EndLSN)
	}
	return nil
}

func (d *demo) printWhereToLook(m *manifest.Manifest, sums []*tableSummary) {
	sink := d.rel(d.sink)
	d.printf("\nWhere to look:\n")
	d.printf("  sink:         %s/\n", sink)
	d.printf("  manifest:     %s   (which files make up each table, per epoch)\n", path.Join(sink, manifest.Key))
	for _, s := range sums {
		if s.key == "public.orders" && s.exampleFile != "" {
			d.printf("  example file: %s   (%d I, %d U, %d D rows)\n", path.Join(sink, s.exampleFile), s.exampleFileOps.I, s.exampleFileOps.U, s.exampleFileOps.D)
		}
	}
	d.printf("  pg-cdc log:   %s\n", d.rel(d.logPath))
	d.printf("  config:       %s   (try: %s -c %s status)\n", d.rel(d.config), d.rel(d.bin), d.rel(d.config))
}

// sortedTables returns the keys of a manifest's tables in order.
func sortedTables(m *manifest.Manifest) []string {
	keys := make([]string, 0, len(m.Tables))
	for k := range m.Tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
