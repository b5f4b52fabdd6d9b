package bench

import (
	"context"
	"fmt"
	"time"
)

// CopyResult is what Copy read.
type CopyResult struct {
	Rows    int64
	Bytes   int64
	Elapsed time.Duration
}

// Copy runs `COPY (SELECT columns FROM table) TO STDOUT` in format
// ("binary" or "text") on one connection and discards the data, counting
// bytes. query is the SELECT to copy.
func Copy(ctx context.Context, url, query, format string, s Socket) (CopyResult, error) {
	started := time.Now()
	conn, err := connect(ctx, url, "", s, 10*time.Millisecond)
	if err != nil {
		return CopyResult{}, err
	}
	defer conn.Close(context.Background())
	var w counter
	tag, err := conn.CopyTo(ctx, &w, "COPY ("+query+") TO STDOUT (FORMAT "+format+")")
	if err != nil {
		return CopyResult{}, fmt.Errorf("copy: %w", err)
	}
	return CopyResult{Rows: tag.RowsAffected(), Bytes: int64(w), Elapsed: time.Since(started)}, nil
}

type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}
