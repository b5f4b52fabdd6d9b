package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
)

// A line chart written as SVG by hand (the soak section's charts): axes with
// ticks and labels, a title, a legend, one polyline per series, and an
// optional dashed limit line. No dependency: the report links the files.

// chartSeries is one line. A NaN or infinite y is a gap: the polyline
// stops before it and starts again after it.
type chartSeries struct {
	name   string
	xs, ys []float64
}

type lineChart struct {
	title, xLabel, yLabel string
	series                []chartSeries
	// limit, when > 0, is drawn as a dashed horizontal line, labelled
	// limitLabel, and the y axis reaches it.
	limit      float64
	limitLabel string
}

// The canvas and the plot area inside it (the axes' box), in SVG units.
const (
	chartW, chartH = 720, 330
	plotL, plotR   = 78, 700
	plotT, plotB   = 52, 278
)

var chartColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}

// write renders c. The x axis starts at the smallest x, the y axis at 0
// (or below, for a negative value) so that growth reads as it is.
func (c lineChart) write(w io.Writer) error {
	x0, x1, y0, y1 := c.extent()
	xt, yt := niceTicks(x0, x1, 8), niceTicks(y0, y1, 6)
	// The y axis ends on a round tick; the x axis starts on one and ends at
	// the last point (time: a round end would leave the plot's right part
	// empty).
	x0 = xt[0]
	for len(xt) > 2 && xt[len(xt)-1] > x1 {
		xt = xt[:len(xt)-1]
	}
	x1 = math.Max(x1, xt[len(xt)-1])
	y0, y1 = yt[0], yt[len(yt)-1]
	sx := func(x float64) float64 { return plotL + (x-x0)/(x1-x0)*(plotR-plotL) }
	sy := func(y float64) float64 { return plotB - (y-y0)/(y1-y0)*(plotB-plotT) }

	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", chartW, chartH, chartW, chartH)
	p(`<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	p(`<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", plotL, esc(c.title))

	// Grid and ticks.
	yDec, xDec := decimals(yt), decimals(xt)
	for _, v := range yt {
		y := sy(v)
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>`+"\n", plotL, y, plotR, y)
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", plotL-4, y, plotL, y)
		p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotL-7, y, fmt.Sprintf("%.*f", yDec, v))
	}
	for _, v := range xt {
		x := sx(v)
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x, plotB, x, plotB+4)
		p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, plotB+17, fmt.Sprintf("%.*f", xDec, v))
	}
	p(`<rect class="plot-area" x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	p(`<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (plotL+plotR)/2, plotB+38, esc(c.xLabel))
	p(`<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotT+plotB)/2, esc(c.yLabel))

	if c.limit > 0 {
		y := sy(c.limit)
		p(`<line class="limit" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/>`+"\n", plotL, y, plotR, y)
		p(`<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", plotR-4, y-4, esc(c.limitLabel))
	}

	// The series, then the legend above the plot.
	for i, s := range c.series {
		color := chartColors[i%len(chartColors)]
		for _, seg := range segments(s) {
			if len(seg) == 1 {
				p(`<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", sx(seg[0][0]), sy(seg[0][1]), color)
				continue
			}
			p(`<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, color)
			for j, pt := range seg {
				if j > 0 {
					p(" ")
				}
				p("%.1f,%.1f", sx(pt[0]), sy(pt[1]))
			}
			p(`"/>` + "\n")
		}
		lx := plotL + 170*i
		p(`<line x1="%d" y1="38" x2="%d" y2="38" stroke="%s" stroke-width="2"/>`+"\n", lx, lx+18, color)
		p(`<text x="%d" y="42">%s</text>`+"\n", lx+23, esc(s.name))
	}
	p("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// extent is the data's bounding box over every finite point (and the
// limit), never empty.
func (c lineChart) extent() (x0, x1, y0, y1 float64) {
	x0, x1 = math.Inf(1), math.Inf(-1)
	y0, y1 = 0, c.limit
	for _, s := range c.series {
		for i := range min(len(s.xs), len(s.ys)) {
			if !finite(s.ys[i]) || !finite(s.xs[i]) {
				continue
			}
			x0, x1 = math.Min(x0, s.xs[i]), math.Max(x1, s.xs[i])
			y0, y1 = math.Min(y0, s.ys[i]), math.Max(y1, s.ys[i])
		}
	}
	if x0 > x1 {
		x0, x1 = 0, 1
	}
	if x1 == x0 {
		x1 = x0 + 1
	}
	if y1 == y0 {
		y1 = y0 + 1
	}
	return x0, x1, y0, y1
}

// segments splits a series at its gaps into runs of finite points.
func segments(s chartSeries) [][][2]float64 {
	var out [][][2]float64
	var cur [][2]float64
	for i := range min(len(s.xs), len(s.ys)) {
		if !finite(s.xs[i]) || !finite(s.ys[i]) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, [2]float64{s.xs[i], s.ys[i]})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// niceTicks returns about n+1 evenly spaced round values (steps of 1, 2 or
// 5 times a power of ten) from at or below lo to at or above hi.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	first := math.Floor(lo/step+1e-9) * step
	var ticks []float64
	for v := first; ; v += step {
		// Multiples of step, not an accumulated sum, so labels stay round.
		t := math.Round(v/step) * step
		ticks = append(ticks, t)
		if t >= hi-1e-9*step || len(ticks) > 4*n+2 {
			break
		}
	}
	return ticks
}

// decimals is how many decimal places the ticks' labels need.
func decimals(ticks []float64) int {
	if len(ticks) < 2 {
		return 0
	}
	step := ticks[1] - ticks[0]
	return max(0, int(-math.Floor(math.Log10(step)+1e-9)))
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
