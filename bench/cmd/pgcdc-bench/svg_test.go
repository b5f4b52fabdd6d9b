package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgDoc is what the tests read back from a chart: it must decode as XML.
type svgDoc struct {
	root      string
	plot      [4]float64 // x, y, width, height of the plot area
	polylines [][][2]float64
	circles   [][2]float64
	texts     []string
}

func decodeSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	d := xml.NewDecoder(bytes.NewReader(b))
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				doc.root = el.Name.Local
			}
			depth++
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "rect":
				if attr["class"] == "plot-area" {
					for i, k := range []string{"x", "y", "width", "height"} {
						doc.plot[i] = atof(t, attr[k])
					}
				}
			case "polyline":
				var pts [][2]float64
				for _, pair := range strings.Fields(attr["points"]) {
					x, y, ok := strings.Cut(pair, ",")
					if !ok {
						t.Fatalf("point %q", pair)
					}
					pts = append(pts, [2]float64{atof(t, x), atof(t, y)})
				}
				doc.polylines = append(doc.polylines, pts)
			case "circle":
				doc.circles = append(doc.circles, [2]float64{atof(t, attr["cx"]), atof(t, attr["cy"])})
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if s := strings.TrimSpace(string(el)); s != "" {
				doc.texts = append(doc.texts, s)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements (depth %d)", depth)
	}
	return doc
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return v
}

func TestLineChartWellFormedAndInside(t *testing.T) {
	c := lineChart{
		title: `count(*) < 1 & "quoted"`, xLabel: "minutes", yLabel: "ms",
		limit: 64, limitLabel: "limit <64>",
		series: []chartSeries{
			{name: "p50", xs: []float64{0.17, 0.33, 0.5, 0.67, 10}, ys: []float64{12, 15, math.NaN(), 14, 80}},
			{name: "p99 & more", xs: []float64{0.17, 0.33, 0.5, 0.67, 10}, ys: []float64{40, 35, 33, 31, 30}},
		},
	}
	var b bytes.Buffer
	if err := c.write(&b); err != nil {
		t.Fatal(err)
	}
	doc := decodeSVG(t, b.Bytes())
	if doc.root != "svg" {
		t.Fatalf("root element %q", doc.root)
	}
	// The escaped texts come back as written.
	for _, want := range []string{c.title, c.limitLabel, "p99 & more"} {
		found := false
		for _, got := range doc.texts {
			found = found || got == want
		}
		if !found {
			t.Errorf("text %q not in the chart: %q", want, doc.texts)
		}
	}
	// The NaN splits p50 into a run of two points and one of two; p99 is
	// one run of five.
	if len(doc.polylines) != 3 {
		t.Fatalf("%d polylines, want 3", len(doc.polylines))
	}
	x0, y0, w, h := doc.plot[0], doc.plot[1], doc.plot[2], doc.plot[3]
	if w <= 0 || h <= 0 {
		t.Fatalf("plot area %v", doc.plot)
	}
	var xs, ys []float64
	for _, pl := range doc.polylines {
		for _, pt := range pl {
			xs = append(xs, pt[0])
			ys = append(ys, pt[1])
			if pt[0] < x0 || pt[0] > x0+w || pt[1] < y0 || pt[1] > y0+h {
				t.Errorf("point %v outside the plot area %v", pt, doc.plot)
			}
		}
	}
	// Scaled, not just clipped: x and y increase the right way, and the
	// series' span covers most of the width.
	first, last := doc.polylines[2][0], doc.polylines[2][len(doc.polylines[2])-1]
	if !(first[0] < last[0]) || !(first[1] < last[1]) { // p99 falls: its y (SVG, downward) grows
		t.Errorf("p99 from %v to %v: not scaled the right way", first, last)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if hi-lo < 0.8*w {
		t.Errorf("points span %.1f of a %.1f-wide plot", hi-lo, w)
	}
	// 80 is the largest value: it lies at or below the top (the axis ends
	// on a round tick at or above it).
	top := math.Inf(1)
	for _, y := range ys {
		top = math.Min(top, y)
	}
	if top < y0 || top > y0+0.3*h {
		t.Errorf("the largest value is drawn at y %.1f, the plot spans %.1f–%.1f", top, y0, y0+h)
	}
}

func TestLineChartDegenerate(t *testing.T) {
	for name, c := range map[string]lineChart{
		"empty":     {title: "nothing"},
		"all NaN":   {title: "gaps", series: []chartSeries{{name: "a", xs: []float64{1, 2}, ys: []float64{math.NaN(), math.NaN()}}}},
		"one point": {title: "one", series: []chartSeries{{name: "a", xs: []float64{3}, ys: []float64{5}}}},
		"flat":      {title: "flat", series: []chartSeries{{name: "a", xs: []float64{0, 1, 2}, ys: []float64{0, 0, 0}}}},
	} {
		var b bytes.Buffer
		if err := c.write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		doc := decodeSVG(t, b.Bytes())
		for _, pt := range doc.circles {
			if pt[0] < doc.plot[0] || pt[0] > doc.plot[0]+doc.plot[2] || pt[1] < doc.plot[1] || pt[1] > doc.plot[1]+doc.plot[3] {
				t.Errorf("%s: point %v outside %v", name, pt, doc.plot)
			}
		}
		if strings.Contains(b.String(), "NaN") || strings.Contains(b.String(), "Inf") {
			t.Errorf("%s: a NaN or Inf reached the SVG", name)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{0, 9.3, 6, []float64{0, 2, 4, 6, 8, 10}},
		{0.17, 10, 8, []float64{0, 2, 4, 6, 8, 10}},
		{0, 0.33, 6, []float64{0, 0.1, 0.2, 0.3, 0.4}},
		{0, 64, 6, []float64{0, 20, 40, 60, 80}},
	} {
		got := niceTicks(tc.lo, tc.hi, tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
				break
			}
		}
	}
	if d := decimals([]float64{0, 0.1, 0.2}); d != 1 {
		t.Errorf("decimals of 0.1 steps = %d", d)
	}
	if d := decimals([]float64{0, 20, 40}); d != 0 {
		t.Errorf("decimals of 20 steps = %d", d)
	}
}
