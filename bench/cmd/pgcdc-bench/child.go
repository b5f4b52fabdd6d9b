package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pg-cdc/pg-cdc/bench"
)

// The children print one JSON line with their result on stdout.

func socketFlags(fs *flag.FlagSet) *bench.Socket {
	var s bench.Socket
	fs.IntVar(&s.RcvLowat, "rcvlowat", 64<<10, "SO_RCVLOWAT in bytes (0: off)")
	fs.IntVar(&s.ReadBuffer, "read-buffer", 256<<10, "read buffer in bytes (0: pgconn's 8 KiB)")
	fs.IntVar(&s.RcvBuf, "rcvbuf", 0, "SO_RCVBUF in bytes (0: the kernel's autotuning)")
	return &s
}

func childDrain(args []string) int {
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	var o bench.DrainOptions
	var end string
	fs.StringVar(&o.URL, "url", "", "connection URL")
	fs.StringVar(&o.Slot, "slot", "", "slot")
	fs.StringVar(&o.Publication, "publication", "", "publication")
	fs.StringVar(&end, "end", "", "stop at the first non-transactional message at or past this LSN")
	fs.BoolVar(&o.Binary, "binary", false, "ask pgoutput for binary values")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after")
	sock := socketFlags(fs)
	_ = fs.Parse(args)
	lsn, err := pglogrepl.ParseLSN(end)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain: --end:", err)
		return 2
	}
	o.End, o.Socket = lsn, *sock
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := bench.Drain(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

func childCopy(args []string) int {
	fs := flag.NewFlagSet("copy", flag.ExitOnError)
	url := fs.String("url", "", "connection URL")
	query := fs.String("query", "", "the SELECT to copy")
	format := fs.String("format", "binary", "binary or text")
	sock := socketFlags(fs)
	_ = fs.Parse(args)
	res, err := bench.Copy(context.Background(), *url, *query, *format, *sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "copy:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}
