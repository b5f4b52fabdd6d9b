package parquetfile

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdWindow is the encoder's match window. parquet-go compresses one page
// (≤ 256 KiB by default) at a time, so a longer window finds nothing more,
// while parquet.Zstd's default 8 MiB window costs 16 MiB of history per
// encoder: a quarter of the writer's memory budget for no gain.
const zstdWindow = 512 << 10

// zstdCodec is a ZSTD page codec with a window sized for pages. Each Writer
// owns one, so nothing is shared between files.
type zstdCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder // made on first use: a writer never decodes
}

func newZstdCodec() (*zstdCodec, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(zstdWindow),
		zstd.WithLowerEncoderMem(true),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return &zstdCodec{enc: enc}, nil
}

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	if c.dec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		c.dec = d
	}
	return c.dec.DecodeAll(src, dst[:0])
}
