package render

import (
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// typeCase is one column of every type family: its SQL type (for the
// PostgreSQL test), its description as the source adapter discovers it (for
// the round trip without a server), and values in PostgreSQL's canonical
// output text under DateStyle ISO, IntervalStyle postgres, TimeZone UTC,
// extra_float_digits 1, bytea_output hex. Both tests assert that rendering
// gives every value back byte for byte; the PostgreSQL test also asserts
// that PostgreSQL prints each value so, which keeps this list honest.
type typeCase struct {
	sql    string
	col    cdc.Column
	values []string
}

// Type OIDs (pg_type.dat) of the columns below.
const (
	oidBool, oidBytea, oidChar, oidName, oidInt8, oidInt2, oidInt4, oidText = 16, 17, 18, 19, 20, 21, 23, 25
	oidOID, oidJSON, oidInet, oidFloat4, oidFloat8, oidBPChar, oidVarchar   = 26, 114, 869, 700, 701, 1042, 1043
	oidDate, oidTime, oidTimestamp, oidTimestampTZ, oidTimeTZ, oidNumeric   = 1082, 1083, 1114, 1184, 1266, 1700
	oidUUID, oidJSONB, oidInt4Range                                         = 2950, 3802, 3904
	// User-defined types get OIDs from 16384; these stand in for them.
	oidMood, oidMoodArray, oidPosint, oidSpan = 16400, 16399, 16410, 16420
)

func numericMod(p, s int) int32 { return int32(p<<16|s) + 4 }

func scalarCol(oid uint32, mod int32) cdc.Column {
	return cdc.Column{TypeOID: oid, TypeMod: mod}
}

func arrayCol(arrOID, elemOID uint32, mod int32) cdc.Column {
	return cdc.Column{TypeOID: arrOID, TypeMod: mod, ElemTypeOID: elemOID}
}

var moodLabels = []string{"sad", "ok", "happy"}

// typeSetupSQL creates the user-defined types the cases use.
const typeSetupSQL = `CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
	CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
	CREATE DOMAIN span AS interval;`

var typeCases = []typeCase{
	{"bool", scalarCol(oidBool, -1), []string{"t", "f"}},
	{"int2", scalarCol(oidInt2, -1), []string{"-32768", "0", "32767"}},
	{"int4", scalarCol(oidInt4, -1), []string{"-2147483648", "2147483647", "42"}},
	{"int8", scalarCol(oidInt8, -1), []string{"-9223372036854775808", "9223372036854775807", "0"}},
	{"oid", scalarCol(oidOID, -1), []string{"0", "4294967295"}},
	{"float4", scalarCol(oidFloat4, -1), []string{
		"1.5", "-0", "0", "NaN", "Infinity", "-Infinity", "1e+06", "123456", "0.0001", "1e-05",
		"3.4028235e+38", "1e-45", "0.1", "-2.5e-10", "1.1754944e-38", "1.6777216e+07", "333333.34"}},
	{"float8", scalarCol(oidFloat8, -1), []string{
		"1.5e+300", "5e-324", "0.1", "-0", "1e+15", "100000000000000", "123456789012345.6", "0.0001",
		"1e-05", "1.7976931348623157e+308", "NaN", "Infinity", "-Infinity", "2.2250738585072014e-308",
		"-1.5", "0.30000000000000004", "9.007199254740992e+15", "1.2345678901234567e-100"}},
	{"numeric(1,0)", scalarCol(oidNumeric, numericMod(1, 0)), []string{"9", "-9", "0"}},
	{"numeric(5,2)", scalarCol(oidNumeric, numericMod(5, 2)), []string{"0.00", "-0.01", "999.99", "-999.99", "1.50"}},
	{"numeric(12,3)", scalarCol(oidNumeric, numericMod(12, 3)), []string{"123456789.123", "-0.001", "0.000"}},
	{"numeric(18,4)", scalarCol(oidNumeric, numericMod(18, 4)), []string{"99999999999999.9999", "-99999999999999.9999", "12.3000"}},
	{"numeric(19,19)", scalarCol(oidNumeric, numericMod(19, 19)), []string{"0.1234567890123456789", "-0.0000000000000000001", "0.0000000000000000000"}},
	{"numeric(20,0)", scalarCol(oidNumeric, numericMod(20, 0)), []string{"-99999999999999999999", "12345678901234567890", "0"}},
	{"numeric(38,10)", scalarCol(oidNumeric, numericMod(38, 10)), []string{
		"9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999",
		"0.0000000001", "0.0000000000", "-1.0000000000", "170141183460469231731.6873037158"}},
	{"numeric", scalarCol(oidNumeric, -1), []string{
		"NaN", "Infinity", "-Infinity", "3.14159265358979323846264338327950288419716939937510", "-0.001",
		strings.Repeat("9", 1000), "100"}},
	{"text", scalarCol(oidText, -1), []string{
		"", "héllo 😀 世界", "a,b\"c\nd\re", "NULL", " lead", "tab\there", `back\slash`, "{x}", "\\."}},
	{"varchar(10)", scalarCol(oidVarchar, 14), []string{"ten chars!", ""}},
	{"char(3)", scalarCol(oidBPChar, 7), []string{"ab ", "   ", "xyz"}},
	{"name", scalarCol(oidName, -1), []string{"pg_class"}},
	{`"char"`, scalarCol(oidChar, -1), []string{"x"}},
	{"bytea", scalarCol(oidBytea, -1), []string{`\x`, `\x00ff00`, `\xdeadbeef`}},
	{"uuid", scalarCol(oidUUID, -1), []string{
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"}},
	{"json", scalarCol(oidJSON, -1), []string{`{"b": 1,  "a": [true, null], "b": 2}`, `"s"`, `null`, "[1,\n 2]", `123.450`}},
	{"jsonb", scalarCol(oidJSONB, -1), []string{`{"a": 1, "b": [1, 2]}`, `[]`, `"x\ny"`, `123.450`, "{\"<&>\": \"\u2028\"}"}},
	{"date", scalarCol(oidDate, -1), []string{
		"2024-01-02", "0044-03-15 BC", "0001-01-01 BC", "0001-01-01", "5874897-12-31", "4714-11-24 BC",
		"infinity", "-infinity", "1970-01-01", "1969-12-31", "9999-12-31", "12345-06-07", "2000-02-29"}},
	{"time", scalarCol(oidTime, -1), []string{"00:00:00", "24:00:00", "12:34:56.789", "23:59:59.999999", "00:00:00.000001"}},
	{"timetz", scalarCol(oidTimeTZ, -1), []string{"12:00:00+05:45", "00:00:00-03:30", "23:59:59.999999+00"}},
	{"timestamp", scalarCol(oidTimestamp, -1), []string{
		"2024-01-02 03:04:05.123456", "2024-01-02 03:04:05", "2024-01-02 03:04:05.5", "0001-01-01 00:00:00 BC",
		"4714-11-24 00:00:00 BC", "294247-01-09 23:59:59.999999", "infinity", "-infinity",
		"1969-12-31 23:59:59.999999", "1970-01-01 00:00:00", "0044-03-15 12:00:00.01 BC"}},
	{"timestamptz", scalarCol(oidTimestampTZ, -1), []string{
		"2024-01-02 03:04:05.123456+00", "2024-01-02 03:04:05+00", "0001-01-01 00:00:00+00 BC",
		"4714-11-24 00:00:00+00 BC", "infinity", "-infinity", "1969-12-31 23:59:59.999999+00",
		"294247-01-09 23:59:59.999999+00"}},
	{"interval", scalarCol(1186, -1), []string{
		"1 year 2 mons 3 days 04:05:06.5", "1 year 2 mons -3 days +04:05:06.000007", "-1 days +02:00:00",
		"00:00:00", "-178000000 years", "1 mon", "-00:00:01", "1 day -00:00:01", "-1 years -2 mons +3 days -04:05:06",
		"11 mons 1 day -00:00:01", "-11 mons +1 day 00:00:01", "-1 years -1 mons", "-2 days", "3 days -04:00:00", "-1 mons +1 day", "100:00:00", "-1 days -100:00:00.5"}},
	{"mood", cdc.Column{TypeOID: oidMood, TypeMod: -1, EnumLabels: moodLabels}, []string{"happy", "sad"}},
	{"posint", cdc.Column{TypeOID: oidPosint, TypeMod: -1, BaseTypeOID: oidInt4, BaseTypeMod: -1}, []string{"7"}},
	{"span", cdc.Column{TypeOID: oidSpan, TypeMod: -1, BaseTypeOID: 1186, BaseTypeMod: -1}, []string{"-1 days +01:00:00", "2 days"}},
	{"inet", scalarCol(oidInet, -1), []string{"192.168.0.1/24", "::1", "10.0.0.1"}},
	{"int4range", scalarCol(oidInt4Range, -1), []string{"[1,10)", "empty"}},
	{"money", scalarCol(790, -1), []string{"$12.34", "-$0.01"}},

	{"bool[]", arrayCol(1000, oidBool, -1), []string{"{t,f,NULL}"}},
	{"int2[]", arrayCol(1005, oidInt2, -1), []string{"{-32768,32767}"}},
	{"int4[]", arrayCol(1007, oidInt4, -1), []string{"{1,2,NULL}", "{}", "{NULL}", "{-2147483648}", "{NULL,NULL}"}},
	{"int8[]", arrayCol(1016, oidInt8, -1), []string{"{9223372036854775807,-9223372036854775808}"}},
	{"oid[]", arrayCol(1028, oidOID, -1), []string{"{4294967295}"}},
	{"float4[]", arrayCol(1021, oidFloat4, -1), []string{"{1.5,NaN,-Infinity,1e+06}"}},
	{"float8[]", arrayCol(1022, oidFloat8, -1), []string{"{1.5,NaN,-Infinity,-0,1e+300,0.1}"}},
	{"numeric(10,2)[]", arrayCol(1231, oidNumeric, numericMod(10, 2)), []string{"{1.50,NULL,-0.01}", "{}"}},
	{"numeric(30,5)[]", arrayCol(1231, oidNumeric, numericMod(30, 5)), []string{"{-1234567890123456789012345.12345}"}},
	{"numeric[]", arrayCol(1231, oidNumeric, -1), []string{"{1.5,NaN,Infinity,-Infinity}"}},
	{"text[]", arrayCol(1009, oidText, -1), []string{
		`{"a b","NULL",NULL,"q\"x\\y",""}`, `{abc,"{x}","a,b"," ","null",é}`, "{\"tab\there\",\"nl\nx\",\"nuLL\"}",
		`{"\\.",x}`}},
	{"varchar[]", arrayCol(1015, oidVarchar, -1), []string{`{"",x}`}},
	{"char(3)[]", arrayCol(1014, oidBPChar, 7), []string{`{"ab ",xyz}`}},
	{"bytea[]", arrayCol(1001, oidBytea, -1), []string{`{"\\x00ff","\\x",NULL}`}},
	{"uuid[]", arrayCol(2951, oidUUID, -1), []string{"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}"}},
	{"json[]", arrayCol(199, oidJSON, -1), []string{`{"{\"a\": 1}","[1, 2]",NULL,2}`}},
	{"jsonb[]", arrayCol(3807, oidJSONB, -1), []string{`{"{\"a\": 1}","\"s\"","null",NULL}`}},
	{"date[]", arrayCol(1182, oidDate, -1), []string{`{2024-01-02,"0044-03-15 BC",infinity,-infinity}`}},
	{"time[]", arrayCol(1183, oidTime, -1), []string{"{00:00:00,24:00:00,12:34:56.5}"}},
	{"timetz[]", arrayCol(1270, oidTimeTZ, -1), []string{"{12:00:00+05:45}"}},
	{"timestamp[]", arrayCol(1115, oidTimestamp, -1), []string{`{"2024-01-02 03:04:05",-infinity}`}},
	{"timestamptz[]", arrayCol(1185, oidTimestampTZ, -1), []string{`{"2024-01-02 03:04:05.5+00",infinity,NULL}`}},
	{"interval[]", arrayCol(1187, 1186, -1), []string{`{"1 year 2 mons","-1 days +02:00:00",00:00:00}`}},
	{"mood[]", cdc.Column{TypeOID: oidMoodArray, TypeMod: -1, ElemTypeOID: oidMood, EnumLabels: moodLabels}, []string{"{sad,NULL,happy}"}},
	{"inet[]", arrayCol(1041, oidInet, -1), []string{"{192.168.0.1/24,::1}"}},
}
