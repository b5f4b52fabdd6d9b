package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// profile is the top of pg-cdc's CPU and allocation profiles for one drain.
type profile struct {
	run    drainRun
	cpuTop string
	memTop string
	files  string
}

// profileDrain drains one more slot with pg-cdc's profiling variables set
// (internal/profiling); the run is not counted with the others, since
// profiling slows it a little.
func (h *harness) profileDrain(ctx context.Context, r pgcdcRun, rows int) (*profile, error) {
	cpu, mem := filepath.Join(r.dir, "cpu.pprof"), filepath.Join(r.dir, "mem.pprof")
	h.logf("profiling a pg-cdc drain (%s, %s)", cpu, mem)
	run, err := h.drainPGCDC(ctx, h.bin, r, rows, []string{"PG_CDC_CPUPROFILE=" + cpu, "PG_CDC_MEMPROFILE=" + mem})
	if err != nil {
		return nil, err
	}
	p := &profile{run: run, files: r.dir}
	p.cpuTop, p.memTop = h.pprofTops(ctx, cpu, mem)
	return p, nil
}

// pprofTops returns the top of a CPU and an allocation profile of pg-cdc.
func (h *harness) pprofTops(ctx context.Context, cpu, mem string) (cpuTop, memTop string) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "(go not on PATH: run go tool pprof -top " + cpu + ")", ""
	}
	top := func(args ...string) string {
		out, err := exec.CommandContext(ctx, goBin, append([]string{"tool", "pprof", "-top", "-nodecount=30"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("(go tool pprof failed: %v)\n%s", err, out)
		}
		return trimPprof(string(out))
	}
	return top(h.bin, cpu), top("-sample_index=alloc_space", h.bin, mem)
}

// trimPprof drops pprof's header lines that name local files.
func trimPprof(s string) string {
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
