//go:build !race

package parquetfile

const raceEnabled = false
