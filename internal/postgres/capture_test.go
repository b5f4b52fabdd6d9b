package postgres

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

var updateSeeds = flag.Bool("update-seeds", false, "write the captured pgoutput streams as fuzz seeds of internal/pgoutput")

// TestRealStreamDecodes captures what a real PostgreSQL sends for every
// kind of message pg-cdc handles — DML on many types, TOAST left unchanged,
// a key change, TRUNCATE, logical messages, a streamed transaction with a
// rolled-back savepoint, an aborted streamed transaction — and decodes all
// of it with pgoutput.Decoder. With -update-seeds it also stores the
// captured streams as seeds of pgoutput's FuzzDecodeSequence, so the fuzzer
// starts from real traffic rather than hand-built frames.
func TestRealStreamDecodes(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE cap (id int PRIMARY KEY, t text, n numeric(10,2), ts timestamptz, d date, u uuid,
	          j jsonb, b bytea, a int[], f float8, big text)`,
		`ALTER TABLE cap ALTER big SET STORAGE EXTERNAL`,
		`CREATE TABLE cap_full (id int, v text)`, `ALTER TABLE cap_full REPLICA IDENTITY FULL`)
	ids := []cdc.TableID{{Schema: "public", Name: "cap"}, {Schema: "public", Name: "cap_full"}}
	if err := e.db.EnsurePublication(ctx, "cap_pub", ids); err != nil {
		t.Fatal(err)
	}
	r := e.replConn()
	cp, _, err := r.CreateSlot(ctx, "cap_slot")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartReplication(ctx, "cap_slot", "cap_pub", cp); err != nil {
		t.Fatal(err)
	}

	// Small transactions: sent whole at commit.
	e.exec(`INSERT INTO cap VALUES (1, 'tab	and "quote"', 12.5, '2026-11-29 08:00:00.123456+00', '2026-11-29',
	          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, null]}', '\x00ff', '{1,NULL,3}', 'NaN', repeat('x', 5000)),
	          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '-Infinity', NULL)`,
		`UPDATE cap SET t = 'changed' WHERE id = 1`,
		`UPDATE cap SET id = 10 WHERE id = 2`,
		`DELETE FROM cap WHERE id = 10`,
		`INSERT INTO cap_full VALUES (1, 'a'), (2, 'b')`,
		`UPDATE cap_full SET v = 'c' WHERE id = 1`,
		`DELETE FROM cap_full WHERE id = 2`,
		`SELECT pg_logical_emit_message(true, 'cap', 'in a transaction')`,
		`SELECT pg_logical_emit_message(false, 'cap', 'outside')`,
		`TRUNCATE cap, cap_full`)
	// Large transactions: streamed in chunks (logical_decoding_work_mem is
	// 64kB in pgtest clusters), one with a rolled-back savepoint, one aborted.
	e.exec(`BEGIN; INSERT INTO cap (id, t) SELECT g, repeat('s', 100) FROM generate_series(100, 1100) g;
	          SAVEPOINT s; INSERT INTO cap (id, t) SELECT g, 'gone' FROM generate_series(2000, 2600) g;
	          ROLLBACK TO s; INSERT INTO cap (id) VALUES (3000); COMMIT`)
	e.exec(`BEGIN; INSERT INTO cap (id, t) SELECT g, repeat('a', 100) FROM generate_series(5000, 6000) g; ROLLBACK`)
	var marker string
	if err := e.db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_logical_emit_message(false, 'cap', 'end')::text`).Scan(&marker)
	}); err != nil {
		t.Fatal(err)
	}
	end, err := cdc.ParseLSN(marker)
	if err != nil {
		t.Fatal(err)
	}

	dec := pgoutput.NewDecoder()
	counts := map[string]int{}
	var payloads [][]byte
	for {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := r.Receive(rctx)
		cancel()
		if err != nil {
			t.Fatalf("receive after %v: %v", counts, err)
		}
		if m.Kind != XLogData {
			continue
		}
		msg, err := dec.Decode(m.Data)
		if err != nil {
			t.Fatalf("decode a real %q message: %v", m.Data[0], err)
		}
		counts[fmt.Sprintf("%T", msg)]++
		payloads = append(payloads, append([]byte(nil), m.Data...))
		if lm, ok := msg.(*pgoutput.LogicalMessage); ok && !lm.Transactional && lm.LSN >= end {
			break
		}
	}
	for _, want := range []string{"*pgoutput.Begin", "*pgoutput.Commit", "*pgoutput.Relation", "*pgoutput.Insert",
		"*pgoutput.Update", "*pgoutput.Delete", "*pgoutput.Truncate", "*pgoutput.LogicalMessage",
		"*pgoutput.StreamStart", "*pgoutput.StreamStop", "*pgoutput.StreamCommit", "*pgoutput.StreamAbort"} {
		if counts[want] == 0 {
			t.Errorf("the captured stream has no %s: %v", want, counts)
		}
	}
	if *updateSeeds {
		writeSeeds(t, payloads)
	}
}

// writeSeeds stores the stream as two FuzzDecodeSequence corpus files,
// framed the way that fuzz test reads them (a 2-byte length before each
// payload): the transactions sent whole, and the streamed ones with at most
// three row messages kept per chunk, so the seed stays small and still
// decodes from start to end.
func writeSeeds(t *testing.T, payloads [][]byte) {
	dir := filepath.Join("..", "pgoutput", "testdata", "fuzz", "FuzzDecodeSequence")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var whole, streamed []byte
	inStreams, rowsInChunk := false, 0
	for _, p := range payloads {
		if len(p) > 60000 {
			t.Fatalf("a %d-byte payload does not fit a 16-bit frame", len(p))
		}
		switch p[0] {
		case 'S':
			inStreams, rowsInChunk = true, 0
		case 'I', 'U', 'D':
			if inStreams {
				if rowsInChunk++; rowsInChunk > 3 {
					continue
				}
			}
		}
		framed := binary.BigEndian.AppendUint16(nil, uint16(len(p)))
		framed = append(framed, p...)
		if inStreams {
			streamed = append(streamed, framed...)
		} else {
			whole = append(whole, framed...)
		}
	}
	for name, data := range map[string][]byte{"captured-whole-transactions": whole, "captured-streamed-transactions": streamed} {
		if len(data) == 0 {
			t.Fatalf("seed %s is empty", name)
		}
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote seeds to %s (%d and %d bytes)", dir, len(whole), len(streamed))
}
