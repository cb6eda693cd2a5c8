package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"
)

// etaWindow is how far back the rate the ETA is drawn from looks.
const etaWindow = 60 * time.Second

// progress returns the counters of the run's progress: the share of the
// inputs done, and the time the rest should take at the latest rate.
func progress(d *Data) []counter {
	pct := counter{"progress", "done %", "-1", "unknown"}
	eta := counter{"eta", "ETA", "-1", "unknown"}
	in := int64(d.Totals.Inputs)
	if in > 0 {
		f := min(float64(d.Totals.Done)/float64(in), 1)
		pct = counter{"progress", "done %", fmt.Sprintf("%.4f", f), fmt.Sprintf("%.1f%%", 100*f)}
	}
	switch {
	case in > 0 && d.Totals.Done >= in:
		eta = counter{"eta", "ETA", "0", "finished"}
	case d.Done:
		eta = counter{"eta", "ETA", "-1", "not running"}
	case in > 0:
		if rate := recentRate(d.Samples); rate > 0 {
			sec := float64(in-d.Totals.Done) / rate
			eta = counter{"eta", "ETA", fmt.Sprintf("%.0f", sec), (time.Duration(sec * float64(time.Second))).Round(time.Second).String()}
		}
	}
	return []counter{pct, eta}
}

// recentRate returns the results per second over the samples' last
// etaWindow (or the two last samples, when they are further apart); 0
// with fewer than two samples.
func recentRate(ss []Sample) float64 {
	if len(ss) < 2 {
		return 0
	}
	last := ss[len(ss)-1]
	j := len(ss) - 2
	for j > 0 && last.T-ss[j-1].T <= etaWindow.Seconds() {
		j--
	}
	dt := last.T - ss[j].T
	if dt <= 0 {
		return 0
	}
	return float64(last.Done-ss[j].Done) / dt
}

// runsText says which runs of a job a page covers; "" for one run or
// none recorded.
func runsText(runs []Run) string {
	if len(runs) < 2 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "This report covers the whole job: its %d runs (the job was resumed), ", len(runs))
	for i, r := range runs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "run %d from %s for %s", i+1, r.Start.UTC().Format("2006-01-02 15:04:05 UTC"),
			r.End.Sub(r.Start).Round(time.Second))
	}
	b.WriteString(". Counters and charts add up all runs.")
	return b.String()
}

// resultsSection returns the results table's section: its controls, an
// empty table that resultsScript fills, and the rows as JSON; "" when res
// is nil.
func resultsSection(res *Results) template.HTML {
	if res == nil {
		return ""
	}
	if res.Rows == nil {
		res = &Results{Rows: []Row{}, Total: res.Total, Failed: res.Failed, Chosen: res.Chosen}
	}
	// Marshal escapes <, > and & (so "</script>" cannot end the element)
	// and U+2028/U+2029; it cannot fail on strings and numbers.
	data, _ := json.Marshal(res)
	var b strings.Builder
	b.WriteString(`<section class="results" id="results">
<h2>Results</h2>
<p class="caption" id="results-chosen">`)
	b.WriteString(esc(res.Chosen))
	b.WriteString(`</p>
<div class="controls"><input type="search" id="results-search" placeholder="search index, input, output, error" aria-label="search the results">
<select id="results-kind" aria-label="filter by result"><option value="">all results</option></select>
<button type="button" id="results-prev">&lsaquo; previous</button><span id="results-page"></span><button type="button" id="results-next">next &rsaquo;</button></div>
<table id="results-table"><thead><tr><th>#</th><th>result</th><th>input</th><th>output</th><th>error</th><th>turns</th><th>tokens</th><th>cost</th></tr></thead><tbody id="results-body"></tbody></table>
<noscript><p class="caption">The results table needs JavaScript, which this page runs inline (nothing is loaded).</p></noscript>
<script type="application/json" id="results-data">`)
	b.Write(data)
	b.WriteString(`</script>
</section>`)
	return template.HTML(b.String())
}

// resultsScript draws the results table from #results-data: search (the
// index, input, output and error, case-insensitive), a filter (ok,
// failed, running, or one error kind) and pages of 50 rows.
// window.batchagentResults(data) swaps in new rows (the live page's).
const resultsScript = `<script>
"use strict";
(function () {
  const PAGE = 50;
  const $ = function (id) { return document.getElementById(id); };
  let data = JSON.parse($("results-data").textContent);
  let view = [], page = 0;
  function cost(c) { return c < 0 ? "?" : "$" + c.toFixed(c < 0.01 ? 6 : 4); }
  function kinds() {
    const sel = $("results-kind"), cur = sel.value, byKind = {};
    let ok = 0, failed = 0, running = 0;
    for (const r of data.rows) {
      if (r.s === "done") ok++; else if (r.s === "failed") { failed++; byKind[r.k] = (byKind[r.k] || 0) + 1; } else running++;
    }
    const opts = [["", "all results (" + data.rows.length + ")"], ["ok", "ok (" + ok + ")"], ["failed", "failed (" + failed + ")"]];
    if (running) opts.push(["running", "running (" + running + ")"]);
    for (const k of Object.keys(byKind).sort()) opts.push(["kind:" + k, "error " + k + " (" + byKind[k] + ")"]);
    sel.textContent = "";
    for (const o of opts) {
      const e = document.createElement("option");
      e.value = o[0]; e.textContent = o[1];
      sel.appendChild(e);
    }
    sel.value = opts.some(function (o) { return o[0] === cur; }) ? cur : "";
  }
  function filter() {
    const q = $("results-search").value.trim().toLowerCase(), k = $("results-kind").value;
    view = data.rows.filter(function (r) {
      if (k === "ok" && r.s !== "done") return false;
      if (k === "failed" && r.s !== "failed") return false;
      if (k === "running" && r.s !== "running") return false;
      if (k.startsWith("kind:") && (r.s !== "failed" || r.k !== k.slice(5))) return false;
      if (q) {
        if (r.h === undefined) r.h = (r.i + "\n" + r.in + "\n" + (r.out || "") + "\n" + (r.e || "")).toLowerCase();
        if (!r.h.includes(q)) return false;
      }
      return true;
    });
  }
  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.className = cls;
    if (cls.startsWith("text")) {
      const clip = document.createElement("div");
      clip.className = "clip";
      clip.textContent = text;
      td.appendChild(clip);
    } else {
      td.textContent = text;
    }
    tr.appendChild(td);
  }
  function render() {
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    page = Math.min(Math.max(page, 0), pages - 1);
    const body = $("results-body"), rows = document.createDocumentFragment();
    for (const r of view.slice(page * PAGE, page * PAGE + PAGE)) {
      const tr = document.createElement("tr");
      tr.dataset.index = r.i; tr.dataset.status = r.s;
      if (r.k) tr.dataset.kind = r.k;
      cell(tr, r.i, "num");
      cell(tr, r.s === "failed" ? r.k : r.s === "done" ? "ok" : r.s, "status");
      cell(tr, r.in, "text");
      cell(tr, r.out || "", "text");
      cell(tr, r.e || "", "text err");
      cell(tr, r.t, "num");
      cell(tr, r.med ? r.tok + " (" + r.med + " media)" : r.tok, "num");
      cell(tr, cost(r.c), "num");
      rows.appendChild(tr);
    }
    body.textContent = "";
    body.appendChild(rows);
    const p = $("results-page");
    p.dataset.page = page + 1; p.dataset.pages = pages; p.dataset.rows = view.length;
    p.textContent = " page " + (page + 1) + " of " + pages + " \u00b7 " + view.length + " rows ";
    $("results-prev").disabled = page === 0;
    $("results-next").disabled = page >= pages - 1;
    $("results-chosen").textContent = data.chosen;
  }
  $("results-search").addEventListener("input", function () { page = 0; filter(); render(); });
  $("results-kind").addEventListener("change", function () { page = 0; filter(); render(); });
  $("results-prev").addEventListener("click", function () { page--; render(); });
  $("results-next").addEventListener("click", function () { page++; render(); });
  $("results-body").addEventListener("click", function (e) {
    const td = e.target.closest && e.target.closest("td.text");
    if (td) td.classList.toggle("open");
  });
  window.batchagentResults = function (d) { data = d; kinds(); filter(); render(); };
  kinds(); filter(); render();
  document.body.dataset.results = "ready";
})();
</script>`
