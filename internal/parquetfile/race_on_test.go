//go:build race

package parquetfile

// raceEnabled: the race detector makes the memory tests slow and their heap
// numbers meaningless, so they skip.
const raceEnabled = true
