package query

import (
	"math/big"
	"reflect"
	"time"
)

// estimateSize is the byte cap's measure of a value, about what it takes
// to carry it (in memory or encoded): strings and blobs by length, numbers
// by width, nested values by their parts, a NULL as one byte. It needs no
// precision, only to grow with the value, so that a result of few rows but
// huge values is cut like one of many rows.
func estimateSize(v any) int64 {
	switch x := v.(type) {
	case nil:
		return 1
	case bool, int8, uint8:
		return 1
	case int16, uint16:
		return 2
	case int32, uint32, float32:
		return 4
	case int, int64, uint, uint64, float64:
		return 8
	case string:
		return int64(len(x))
	case []byte:
		return int64(len(x))
	case time.Time, Infinity:
		return 8
	case *big.Int:
		if x == nil {
			return 1
		}
		return int64(len(x.Bits())*8 + 1)
	case Interval:
		return 16
	case []any:
		var n int64
		for _, e := range x {
			n += estimateSize(e)
		}
		return n
	case map[string]any:
		var n int64
		for k, e := range x {
			n += int64(len(k)) + estimateSize(e)
		}
		return n
	case []MapEntry:
		var n int64
		for _, e := range x {
			n += estimateSize(e.Key) + estimateSize(e.Value)
		}
		return n
	}
	// Anything else (a type the driver adds later): its shallow size, and
	// the length of whatever it holds.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		return int64(rv.Len())
	case reflect.Slice, reflect.Array, reflect.Map:
		return int64(rv.Len()) * max(1, int64(rv.Type().Elem().Size()))
	}
	return int64(rv.Type().Size())
}

func rowSize(row []any) int64 {
	var n int64
	for _, v := range row {
		n += estimateSize(v)
	}
	return n
}
