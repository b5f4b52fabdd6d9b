package mergesql

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// DuckType is the DuckDB type DuckDB reads a column of the manifest's
// Parquet type as ("INT64" → BIGINT, "LIST<INT32>" → INTEGER[], …).
func DuckType(parquetType string) (string, error) {
	if elem, ok := strings.CutPrefix(parquetType, "LIST<"); ok && strings.HasSuffix(elem, ">") {
		t, err := DuckType(strings.TrimSuffix(elem, ">"))
		if err != nil {
			return "", err
		}
		return t + "[]", nil
	}
	if strings.HasPrefix(parquetType, "DECIMAL(") {
		return parquetType, nil
	}
	t, ok := map[string]string{
		"BOOLEAN": "BOOLEAN", "INT16": "SMALLINT", "INT32": "INTEGER", "INT64": "BIGINT",
		"FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "STRING": "VARCHAR", "ENUM": "VARCHAR", "JSON": "JSON",
		"BINARY": "BLOB", "DATE": "DATE", "TIME(us)": "TIME", "TIMESTAMP(us)": "TIMESTAMP",
		"TIMESTAMP(us,UTC)": "TIMESTAMPTZ", "UUID": "UUID",
	}[parquetType]
	if !ok {
		return "", fmt.Errorf("the query layer does not know Parquet type %q", parquetType)
	}
	return t, nil
}

// List definition levels of an array column (Optional(List(Optional(el))),
// internal/parquetfile): 0 a NULL array, 1 an empty one, 2 a NULL element,
// 3 an element.
const (
	listEmptyDef   = 1
	listNullDef    = 2
	listElementDef = 3
)

// literalOf renders the leaf values of one column value (as
// parquetfile.Schema.ColumnValues returns them) as a DuckDB expression of
// the column's type.
func literalOf(parquetType string, vals []parquet.Value) (string, error) {
	elem, isList := strings.CutPrefix(parquetType, "LIST<")
	if !isList {
		if len(vals) != 1 {
			return "", fmt.Errorf("%d values for a %s value", len(vals), parquetType)
		}
		if vals[0].IsNull() {
			return "NULL", nil
		}
		return scalarLiteral(parquetType, vals[0])
	}
	elem = strings.TrimSuffix(elem, ">")
	if len(vals) == 0 || vals[0].DefinitionLevel() == 0 {
		return "NULL", nil
	}
	if vals[0].DefinitionLevel() == listEmptyDef {
		return "[]", nil
	}
	parts := make([]string, 0, len(vals))
	for _, v := range vals {
		if v.DefinitionLevel() < listElementDef || v.IsNull() {
			parts = append(parts, "NULL")
			continue
		}
		lit, err := scalarLiteral(elem, v)
		if err != nil {
			return "", err
		}
		parts = append(parts, lit)
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

// scalarLiteral renders one non-null leaf value of type t.
func scalarLiteral(t string, v parquet.Value) (string, error) {
	switch t {
	case "BOOLEAN":
		return strings.ToUpper(strconv.FormatBool(v.Boolean())), nil
	case "INT16", "INT32":
		return strconv.FormatInt(int64(v.Int32()), 10), nil
	case "INT64":
		return strconv.FormatInt(v.Int64(), 10), nil
	case "FLOAT":
		return floatLiteral(float64(v.Float()), 32), nil
	case "DOUBLE":
		return floatLiteral(v.Double(), 64), nil
	case "STRING", "ENUM", "JSON":
		return Literal(string(v.ByteArray())), nil
	case "BINARY":
		return fmt.Sprintf("from_hex(%s)", Literal(hex.EncodeToString(v.ByteArray()))), nil
	case "DATE":
		return fmt.Sprintf("(DATE '1970-01-01' + %d)", v.Int32()), nil
	case "TIME(us)":
		d := time.Duration(v.Int64()) * time.Microsecond
		return fmt.Sprintf("TIME '%02d:%02d:%02d.%06d'", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60, (d%time.Second)/time.Microsecond), nil
	case "TIMESTAMP(us)":
		return fmt.Sprintf("make_timestamp(%d)", v.Int64()), nil
	case "TIMESTAMP(us,UTC)":
		return fmt.Sprintf("make_timestamptz(%d)", v.Int64()), nil
	case "UUID":
		b := v.ByteArray()
		if len(b) != 16 {
			return "", fmt.Errorf("a UUID of %d bytes", len(b))
		}
		return fmt.Sprintf("'%x-%x-%x-%x-%x'", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
	}
	if scale, ok := decimalScale(t); ok {
		return Literal(decimalText(v, scale)), nil
	}
	return "", fmt.Errorf("the query layer does not know Parquet type %q", t)
}

func floatLiteral(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "'NaN'"
	case math.IsInf(f, 1):
		return "'Infinity'"
	case math.IsInf(f, -1):
		return "'-Infinity'"
	}
	return Literal(strconv.FormatFloat(f, 'g', -1, bits))
}

// decimalScale is the scale of "DECIMAL(p,s)".
func decimalScale(t string) (int, bool) {
	var p, s int
	if _, err := fmt.Sscanf(t, "DECIMAL(%d,%d)", &p, &s); err != nil {
		return 0, false
	}
	return s, true
}

// decimalText is the exact decimal text of an unscaled DECIMAL value (an
// int32, an int64 or big-endian two's complement bytes).
func decimalText(v parquet.Value, scale int) string {
	var unscaled big.Int
	switch v.Kind() {
	case parquet.Int32:
		unscaled.SetInt64(int64(v.Int32()))
	case parquet.Int64:
		unscaled.SetInt64(v.Int64())
	default:
		b := v.ByteArray()
		unscaled.SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 { // negative: two's complement
			unscaled.Sub(&unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
	}
	neg := unscaled.Sign() < 0
	digits := new(big.Int).Abs(&unscaled).String()
	if scale > 0 {
		for len(digits) <= scale {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		digits = "-" + digits
	}
	return digits
}
