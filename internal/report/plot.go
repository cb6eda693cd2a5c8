package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// plot is one SVG chart being drawn: a plot area inside margins, with a
// left axis (and optionally a right one) over x and y domains.
type plot struct {
	b                        strings.Builder
	w, h                     float64 // the SVG's size
	left, right, top, bottom float64 // margins around the plot area
	x0, x1                   float64 // x domain
	y0, y1                   float64 // left y domain
	y2                       float64 // right y domain's top (from 0); 0: no right axis
}

// newPlot starts a chart of size w×h over the given domains; the domains
// are widened to nice tick values. label is the chart's accessible name.
func newPlot(label string, w, h, x0, x1, y0, y1, y2 float64) *plot {
	p := &plot{w: w, h: h, left: 56, right: 16, top: 28, bottom: 38, x0: x0, x1: x1, y0: y0, y1: y1}
	if y2 > 0 {
		p.right = 56
		t := niceTicks(0, y2, 5)
		p.y2 = t[len(t)-1]
	}
	if yt := niceTicks(y0, y1, 5); len(yt) > 1 {
		p.y0, p.y1 = yt[0], yt[len(yt)-1]
	}
	if p.x1 <= p.x0 {
		p.x1 = p.x0 + 1
	}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`,
		w, h, w, h, esc(label))
	return p
}

// esc escapes s for SVG or HTML text and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// X maps v of the x domain to the SVG's x coordinate.
func (p *plot) X(v float64) float64 {
	return p.left + (v-p.x0)/(p.x1-p.x0)*(p.w-p.left-p.right)
}

// Y maps v of the left y domain to the SVG's y coordinate.
func (p *plot) Y(v float64) float64 {
	if p.y1 == p.y0 {
		return p.h - p.bottom
	}
	return p.h - p.bottom - (v-p.y0)/(p.y1-p.y0)*(p.h-p.top-p.bottom)
}

// Y2 maps v of the right y domain to the SVG's y coordinate.
func (p *plot) Y2(v float64) float64 {
	if p.y2 == 0 {
		return p.h - p.bottom
	}
	return p.h - p.bottom - v/p.y2*(p.h-p.top-p.bottom)
}

// axes draws the frame, the ticks and grid lines, and the axis labels.
// xf and yf format tick values; yf also formats the right axis.
func (p *plot) axes(xlabel, ylabel, y2label string, xf, yf func(float64) string) {
	b := &p.b
	bottom, right := p.h-p.bottom, p.w-p.right
	b.WriteString(`<g class="axes">`)
	for _, v := range niceTicks(p.y0, p.y1, 5) {
		y := p.Y(v)
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, p.left, y, right, y)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, p.left-4, y+4, esc(yf(v)))
	}
	if p.y2 > 0 {
		for _, v := range niceTicks(0, p.y2, 5) {
			fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f">%s</text>`, right+4, p.Y2(v)+4, esc(yf(v)))
		}
	}
	for _, v := range niceTicks(p.x0, p.x1, 8) {
		if v < p.x0 || v > p.x1 {
			continue
		}
		x := p.X(v)
		fmt.Fprintf(b, `<line class="tickmark" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, bottom, x, bottom+4)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, bottom+16, esc(xf(v)))
	}
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, p.left, bottom, right, bottom)
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, p.left, p.top, p.left, bottom)
	fmt.Fprintf(b, `<text class="label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (p.left+right)/2, p.h-4, esc(xlabel))
	fmt.Fprintf(b, `<text class="label" x="12" y="%.1f" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>`,
		(p.top+bottom)/2, (p.top+bottom)/2, esc(ylabel))
	if y2label != "" {
		fmt.Fprintf(b, `<text class="label" x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(90 %.1f %.1f)">%s</text>`,
			p.w-8, (p.top+bottom)/2, p.w-8, (p.top+bottom)/2, esc(y2label))
	}
	b.WriteString(`</g>`)
}

// legendItem is one entry of a chart's legend.
type legendItem struct {
	label, class string
}

// colors are the colours of the series and bars drawn with presentation
// attributes, by class: the page's style sheet, which wins over them, may
// name them too.
var colors = map[string]string{
	"s-calling": "#3d7ee0", "s-tools": "#37a76b", "s-waiting": "#c9a227", "s-other": "#9aa2b1",
	"t-errors": "#d9534f",
}

// color returns the presentation attribute of class's colour for
// property (fill or stroke), with a leading space; "" when the style sheet
// alone colours it.
func color(property, class string) string {
	c, ok := colors[class]
	if !ok {
		return ""
	}
	return fmt.Sprintf(` %s="%s"`, property, c)
}

// legend draws the entries in a row above the plot area.
func (p *plot) legend(items ...legendItem) {
	x := p.left
	p.b.WriteString(`<g class="legend">`)
	for _, it := range items {
		fmt.Fprintf(&p.b, `<rect class="%s"%s x="%.1f" y="8" width="10" height="10"/>`, it.class, color("fill", it.class), x)
		fmt.Fprintf(&p.b, `<text x="%.1f" y="17">%s</text>`, x+14, esc(it.label))
		x += 24 + 6.5*float64(len(it.label))
	}
	p.b.WriteString(`</g>`)
}

// note writes a message in the middle of the plot area.
func (p *plot) note(msg string) {
	fmt.Fprintf(&p.b, `<text class="note" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`,
		(p.left+p.w-p.right)/2, (p.top+p.h-p.bottom)/2, esc(msg))
}

// line draws a polyline through (xs[i], ys[i]) on the left axis, or on the
// right one when right is set; step draws a step function.
func (p *plot) line(class, series string, xs, ys []float64, right, step bool) {
	if len(xs) == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<polyline class="%s" data-series="%s" fill="none"%s points="`, class, esc(series), color("stroke", class))
	y := p.Y
	if right {
		y = p.Y2
	}
	for i := range xs {
		if step && i > 0 {
			fmt.Fprintf(&p.b, "%.1f,%.1f ", p.X(xs[i]), y(ys[i-1]))
		}
		fmt.Fprintf(&p.b, "%.1f,%.1f ", p.X(xs[i]), y(ys[i]))
	}
	fmt.Fprintf(&p.b, `" data-last="%s"/>`, strconv.FormatFloat(ys[len(ys)-1], 'f', -1, 64))
}

// end closes the SVG and returns it.
func (p *plot) end() string {
	p.b.WriteString(`</svg>`)
	return p.b.String()
}

// niceTicks returns about n tick values covering [lo, hi], at a step of 1,
// 2 or 5 times a power of ten; the first is at or below lo and the last
// at or above hi. An empty or inverted range gets the ticks of [lo, lo+1].
func niceTicks(lo, hi float64, n int) []float64 {
	if math.IsNaN(lo) || math.IsInf(lo, 0) {
		lo = 0
	}
	if math.IsNaN(hi) || math.IsInf(hi, 0) || hi <= lo {
		hi = lo + 1
	}
	n = max(n, 2)
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	first := math.Floor(lo/step) * step
	var ticks []float64
	for v := first; ; v += step {
		// Round away the float drift of repeated addition.
		r := math.Round(v/step) * step
		ticks = append(ticks, r)
		if r >= hi || len(ticks) > 4*n+2 {
			break
		}
	}
	return ticks
}

// fmtNum formats a count or value compactly: 950, 1.2k, 3.4M, 0.25.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(math.Round(v/1e5)/10, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(math.Round(v/100)/10, 'f', -1, 64) + "k"
	case a == math.Trunc(a):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// fmtSeconds formats a number of seconds as a duration tick: 0, 500ms,
// 1.5s, 2m, 1h30m.
func fmtSeconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1:
		return strconv.FormatFloat(math.Round(s*1000), 'f', 0, 64) + "ms"
	case s < 120:
		return strconv.FormatFloat(s, 'g', 3, 64) + "s"
	case s < 7200:
		return strconv.FormatFloat(s/60, 'g', 3, 64) + "m"
	}
	return strconv.FormatFloat(s/3600, 'g', 3, 64) + "h"
}
