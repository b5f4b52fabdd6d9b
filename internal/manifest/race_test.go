//go:build race

package manifest

// raceEnabled shortens the property tests under the race detector, which
// makes their JSON work about ten times slower; the sequences they run
// are single-goroutine.
const raceEnabled = true
