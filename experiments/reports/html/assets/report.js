/* The report's page: reads the ReportDoc JSON embedded in #report-data and builds the DOM.
   Every text from the data goes in with textContent (never innerHTML): row texts are untrusted.
   Only the current page of each comparison's rows is in the DOM (PAGE rows), so a big sweep
   opens fast. Filters live in location.hash ("#c3:outcome=b_right&label=Yes"). */
(function () {
  "use strict";
  var PAGE = 25;
  var OUTCOMES = [["a_right", "A right"], ["b_right", "B right"], ["both_wrong", "both wrong"]];
  var OUTCOME_TEXT = { a_right: "A right", b_right: "B right", both_wrong: "both wrong" };
  var FILTERS = ["label", "slice", "outcome", "q"];
  var SVGNS = "http://www.w3.org/2000/svg";
  var doc = null;
  var sections = {};  // key -> {s, state, el, list, info, prev, next, selects, rows}

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "class") node.className = attrs[k];
        else if (k === "text") node.textContent = attrs[k];
        else node.setAttribute(k, attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, child) {
    if (child == null || child === false) return node;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return node; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
    return node;
  }
  function svg(tag, attrs) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (attrs[k] != null) node.setAttribute(k, attrs[k]);
    return node;
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  // x with d decimals as Python's format writes it (the console and comparisons.csv): an exact
  // tie rounds to even (0.53125 -> 0.5312), where toFixed would round it up
  function fixed(x, d) {
    var m = Math.pow(10, d), y = Math.abs(x) * m, f = Math.floor(y);
    if (y - f === 0.5 && f % 2 === 0) return ((x < 0 ? -f : f) / m).toFixed(d);
    return x.toFixed(d);
  }
  function fmt(x, d) { return isNum(x) ? fixed(x, d == null ? 3 : d) : "–"; }
  function signed(x, d) {
    if (!isNum(x)) return "–";
    var s = fixed(Math.abs(x), d == null ? 3 : d);
    return (x < 0 && Number(s) !== 0 ? "−" : "+") + s;
  }
  function fmtP(p) {
    if (!isNum(p)) return "–";
    return p < 0.0001 ? "< 0.0001" : fixed(p, 4);
  }
  function iv(lo, hi, sign) {
    if (!isNum(lo) && !isNum(hi)) return "";
    var f = sign ? signed : fmt;
    return " [" + f(lo) + ", " + f(hi) + "]";
  }
  function safeUrl(base) {
    return typeof base === "string" && /^https?:\/\//i.test(base) ? base.replace(/\/+$/, "") : null;
  }
  function runLink(run, label, exp) {
    var base = safeUrl(doc.ui_base);
    if (!base || !run || exp == null || exp === "") return null;
    return el("a", {
      href: base + "/#/experiments/" + encodeURIComponent(exp) + "/runs/" + encodeURIComponent(run),
      target: "_blank", rel: "noopener", class: "run-link", text: label
    });
  }

  // ---- footnotes: long method texts named once under a table --------------------------
  function Notes(prefix) { this.prefix = prefix; this.items = []; this.index = {}; }
  Notes.prototype.ref = function (text) {
    if (text == null || text === "") return null;
    if (!(text in this.index)) { this.items.push(text); this.index[text] = this.items.length; }
    return el("sup", { class: "fn", text: this.prefix + this.index[text] });
  };
  Notes.prototype.block = function (title) {
    if (!this.items.length) return null;
    var box = el("div", { class: "footnotes" }, el("p", null, el("b", { text: title })));
    var p = this.prefix;
    this.items.forEach(function (t, i) { box.appendChild(el("p", null, p + (i + 1) + ": " + t)); });
    return box;
  };

  // ---- header -------------------------------------------------------------------------
  function header(root) {
    root.appendChild(el("h1", { text: doc.title || "Report" }));
    var status = String(doc.status || "");
    root.appendChild(el("p", { class: "meta" },
      el("span", { text: (doc.kind === "import" ? "import " : "sweep ") + (doc.name || "") }),
      el("span", { class: "mono", text: "id " + (doc.id || "") }),
      el("span", { class: "status-" + status.replace(/[^a-z]/g, ""), text: status }),
      el("span", { text: "created " + (doc.created || "") })));
    var notes = doc.notes || [];
    if (notes.length) {
      root.appendChild(el("ul", { class: "notes" }, notes.map(function (n) { return el("li", { text: n }); })));
    }
    var toc = el("nav", { class: "toc" });
    toc.appendChild(el("a", { href: "#comparisons", text: "Comparisons" }));
    if ((doc.figures || []).length) toc.appendChild(el("a", { href: "#figures", text: "Figures" }));
    if ((doc.sequential || []).length) toc.appendChild(el("a", { href: "#sequential", text: "Sequential looks" }));
    if ((doc.samples || []).length) toc.appendChild(el("a", { href: "#samples", text: "Rows where A and B disagree" }));
    root.appendChild(toc);
  }

  // ---- comparison table ---------------------------------------------------------------
  function sampleKey(r) {
    var list = doc.samples || [];
    for (var i = 0; i < list.length; i++) {
      var s = list[i];
      if (s.task === r.task && s.model === r.model && s.a === r.a && s.b === r.b) return s.key;
    }
    return null;
  }
  function comparisonTable(root) {
    root.appendChild(el("h2", { id: "comparisons", text: "Comparisons" }));
    var rows = doc.comparisons || [];
    if (!rows.length) { root.appendChild(el("p", { class: "empty", text: "No comparisons." })); return; }
    var ciNotes = new Notes("I"), testNotes = new Notes("T");
    var head = ["task", "model", "A", "B", "metric", "score A [95% CI]", "score B [95% CI]",
      "A − B [95% CI]", "test", "p", "p corrected", "n"];
    var table = el("table", { class: "comparisons" },
      el("thead", null, el("tr", null, head.map(function (h, i) {
        return el("th", { class: i === 2 || i === 5 ? "arm-a" : i === 3 || i === 6 ? "arm-b" : null, text: h });
      }))));
    var body = el("tbody");
    rows.forEach(function (r) {
      var range = r.k != null;
      var diffCell = el("td", { class: "num" }, isNum(r.score_a) && isNum(r.score_b) ? signed(r.score_a - r.score_b) : "–",
        iv(r.ci_low, r.ci_high, true), ciNotes.ref(r.ci_method));
      var test = el("td", { class: "test" });
      if (r.test) {
        add(test, testNotes.ref(r.test));
        var bits = [];
        if (r.exact) bits.push("exact");
        else if (r.n_resamples != null) bits.push(r.n_resamples + " resamples");
        if (r.n_clusters != null) bits.push(r.n_clusters + " clusters" + (r.clustered_by ? " by " + r.clustered_by : ""));
        add(test, " " + bits.join(", "));
      } else {
        add(test, r.status || "not tested");
      }
      if (range) {
        add(test, el("div", null, "best vs worst of k = " + r.k + "; p after selection " + fmtP(r.p_post_selection),
          testNotes.ref(r.post_selection_test)));
      }
      var corrected = el("td", { class: "num" }, fmtP(r.p_corrected),
        r.correction ? el("div", { class: "muted small", text: r.correction +
          (r.family_size != null ? " over " + r.family_size + " tests" : "") }) : null);
      var tr = el("tr", { class: "main" },
        el("td", { text: r.task == null ? "" : r.task }), el("td", { text: r.model == null ? "" : r.model }),
        el("td", { class: "arm-a", text: r.a }), el("td", { class: "arm-b", text: r.b }),
        el("td", { text: r.metric || "" }),
        el("td", { class: "num" }, fmt(r.score_a), iv(r.ci_a_low, r.ci_a_high)),
        el("td", { class: "num" }, fmt(r.score_b), iv(r.ci_b_low, r.ci_b_high)),
        diffCell, test,
        el("td", { class: "num", text: fmtP(r.p_value) }),
        corrected,
        el("td", { class: "num", text: r.n == null ? "–" : String(r.n) }));
      body.appendChild(tr);
      var rec = r.recommendation && r.recommendation.line;
      var key = sampleKey(r);
      var recCell = el("td", { colspan: String(head.length) }, rec || "");
      if (key) add(recCell, [rec ? " · " : "", el("a", { href: "#" + key, text: "rows where they disagree ↓" })]);
      body.appendChild(el("tr", { class: "rec" }, recCell));
    });
    table.appendChild(body);
    root.appendChild(el("div", { class: "scroll" }, table));
    add(root, [ciNotes.block("Intervals of A − B"), testNotes.block("Tests")]);
  }

  // ---- figures ------------------------------------------------------------------------
  function figures(root) {
    var figs = doc.figures || [];
    if (!figs.length) return;
    root.appendChild(el("h2", { id: "figures", text: "Figures" }));
    var box = el("div");
    figs.forEach(function (f) {
      var img = el("img", { alt: f.name, loading: "lazy" });
      img.src = "data:image/png;base64," + String(f.png_base64 || "").replace(/[^A-Za-z0-9+/=]/g, "");
      box.appendChild(el("figure", { class: "fig" }, img, el("figcaption", { text: f.name })));
    });
    root.appendChild(box);
  }

  // ---- sequential looks ---------------------------------------------------------------
  function looksSvg(looks, delta) {
    var W = 560, H = 170, L = 56, R = 12, T = 10, B = 28;
    var xs = looks.map(function (l) { return l.n; });
    var vals = [0];
    looks.forEach(function (l) { [l.estimate, l.low, l.high].forEach(function (v) { if (isNum(v)) vals.push(v); }); });
    if (isNum(delta)) { vals.push(delta); vals.push(-delta); }
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (hi - lo < 1e-9) { hi += 0.05; lo -= 0.05; }
    var pad = (hi - lo) * 0.06; lo -= pad; hi += pad;
    var nmax = Math.max.apply(null, xs.concat([1]));
    function X(n) { return L + (W - L - R) * (n / nmax); }
    function Y(v) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); }
    var g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", class: "looks-svg" });
    g.appendChild(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de" }));
    g.appendChild(svg("line", { x1: L, x2: W - R, y1: Y(0), y2: Y(0), stroke: "#656d76" }));
    if (isNum(delta)) {
      [delta, -delta].forEach(function (d) {
        g.appendChild(svg("line", { x1: L, x2: W - R, y1: Y(d), y2: Y(d), stroke: "#656d76", "stroke-dasharray": "4 3" }));
      });
    }
    function text(x, y, s, anchor) {
      var t = svg("text", { x: x, y: y, "font-size": 11, fill: "#656d76", "text-anchor": anchor || "start" });
      t.textContent = s;
      g.appendChild(t);
    }
    text(L - 4, Y(hi - pad) + 4, signed(hi - pad, 2), "end");
    text(L - 4, Y(lo + pad) + 4, signed(lo + pad, 2), "end");
    text(L - 4, Y(0) + 4, "0", "end");
    text(L, H - 4, "rows at each look →");
    var est = isNum(looks.length && looks[0].estimate) ? Y(looks[0].estimate) : Y(0);
    looks.forEach(function (l, i) {
      var x = X(l.n), mid = isNum(l.estimate) ? Y(l.estimate) : est;
      // a bound the look does not have yet (unbounded) is drawn dashed to the plot's edge
      [[l.high, T], [l.low, H - B]].forEach(function (end) {
        var open = !isNum(end[0]);
        g.appendChild(svg("line", { x1: x, x2: x, y1: mid, y2: open ? end[1] : Y(end[0]), stroke: "#0969da",
          "stroke-width": 2, "stroke-dasharray": open ? "2 3" : null, opacity: open ? 0.5 : null }));
      });
      if (isNum(l.estimate)) g.appendChild(svg("circle", { cx: x, cy: Y(l.estimate), r: 3, fill: "#1f2328" }));
      if (looks.length <= 12 || i === looks.length - 1) text(x, H - B + 12, String(l.n), "middle");
    });
    return g;
  }
  function sequential(root) {
    var seq = doc.sequential || [];
    if (!seq.length) return;
    root.appendChild(el("h2", { id: "sequential", text: "Sequential looks" }));
    seq.forEach(function (item) {
      var r = item.row || {}, looks = item.looks || [];
      var who = r.a != null && r.b != null ? r.a + " vs " + r.b : r.comparison + (r.k != null ? " of k = " + r.k : "");
      var box = el("div", { class: "seq" });
      box.appendChild(el("h3", { text: r.task + " · " + r.model + ": " + who }));
      box.appendChild(el("p", null, el("b", { text: "decision: " }), r.decision == null ? "none (" + (r.status || "stopped") + ")" : r.decision,
        " · A − B " + signed(r.estimate) + iv(r.ci_low, r.ci_high, true) + " on " + r.n + " rows",
        " · " + (r.sequence || r.method || "") + ", alpha " + r.alpha +
        (isNum(r.delta) ? ", margin ±" + r.delta : "") + ", looks every " + r.batch + " rows up to " + r.budget));
      if (r.recommendation && r.recommendation.line) box.appendChild(el("p", { class: "muted", text: r.recommendation.line }));
      if (looks.length) {
        box.appendChild(looksSvg(looks, r.delta));
        box.appendChild(el("p", { class: "footnotes", text: "A − B at each look (dots) and its interval (bars; dashed: not bounded yet)" +
          (isNum(r.delta) ? "; dashed lines: the equivalence margin ±" + r.delta : "") + "; the line at 0: no difference." }));
        var t = el("table", { class: "looks" }, el("thead", null, el("tr", null,
          ["look", "rows", "A − B", "low", "high"].map(function (h) { return el("th", { text: h }); }))));
        var tb = el("tbody");
        looks.forEach(function (l, i) {
          tb.appendChild(el("tr", null, el("td", { class: "num", text: String(i + 1) }), el("td", { class: "num", text: String(l.n) }),
            el("td", { class: "num", text: signed(l.estimate) }), el("td", { class: "num", text: signed(l.low) }),
            el("td", { class: "num", text: signed(l.high) })));
        });
        t.appendChild(tb);
        box.appendChild(t);
      }
      root.appendChild(box);
    });
  }

  // ---- slice and class tables ---------------------------------------------------------
  function sliceTable(t) {
    var box = el("div", { class: "slices" });
    var title = t.by === "class" ? "Per-class recall (gold " + t.column + ")" : "By slice: " + t.column;
    box.appendChild(el("h4", { text: title + " — " + (t.metric || "") }));
    var head = ["group", "n", "score A [95% CI]", "score B [95% CI]", "A − B [95% CI]", "p", "p Holm", "MDE80", "size"];
    var table = el("table", { class: "slice-table" }, el("thead", null, el("tr", null,
      head.map(function (h, i) { return el("th", { class: i === 2 ? "arm-a" : i === 3 ? "arm-b" : null, text: h }); }))));
    var tb = el("tbody");
    (t.rows || []).forEach(function (r) {
      tb.appendChild(el("tr", { "data-group": r.group },
        el("td", { text: r.group }), el("td", { class: "num", text: String(r.n) }),
        el("td", { class: "num" }, fmt(r.score_a), iv(r.ci_a_low, r.ci_a_high)),
        el("td", { class: "num" }, fmt(r.score_b), iv(r.ci_b_low, r.ci_b_high)),
        el("td", { class: "num" }, signed(r.diff), iv(r.ci_low, r.ci_high, true)),
        el("td", { class: "num", text: fmtP(r.p_value) }), el("td", { class: "num", text: fmtP(r.p_adjusted) }),
        el("td", { class: "num", text: fmt(r.mde_80) }),
        el("td", null, r.small ? el("span", { class: "small-flag", text: "small" }) : null,
          // the flag already says "small": a note that starts with the word goes on from there
          r.note ? " " + (r.small ? String(r.note).replace(/^small\s*/, "") : r.note) : null)));
    });
    table.appendChild(tb);
    box.appendChild(el("div", { class: "scroll" }, table));
    var said = "test: " + (t.test || "–") + "; " + (t.n_resamples != null ? t.n_resamples + " resamples; " : "") +
      "correction: " + (t.correction || "–") + (t.alpha != null ? "; alpha " + t.alpha : "") +
      (t.small_below != null ? "; groups under " + t.small_below + " rows are marked small" : "");
    box.appendChild(el("p", { class: "footnotes", text: said }));
    (t.notes || []).forEach(function (n) { box.appendChild(el("p", { class: "footnotes", text: n })); });
    return box;
  }

  // ---- diffs --------------------------------------------------------------------------
  function diffNode(s, i) {
    var box = el("div", { class: "diff" });
    var ops = i == null ? null : (s.diffs || [])[i];
    if (!ops) { box.classList.add("muted"); box.textContent = "no prompts recorded for this comparison"; return box; }
    ops.forEach(function (op) {
      var kind = op[0], text = op[1];
      if (kind === "-") box.appendChild(el("del", { text: text }));
      else if (kind === "+") box.appendChild(el("ins", { text: text }));
      else if (kind === "~") box.appendChild(el("span", { class: "collapsed", text: text }));
      else box.appendChild(document.createTextNode(text));
    });
    return box;
  }
  function legend() {
    return el("span", { class: "legend muted" }, " ", el("del", { text: "only in A" }), " ", el("ins", { text: "only in B" }));
  }

  // ---- one comparison's rows ------------------------------------------------------------
  function inputOf(s, r) {
    var byTask = (doc.inputs || {})[s.task] || {};
    var t = byTask[r.index];
    return t == null ? null : t;
  }
  function armBox(s, r, side) {
    var arm = r[side] || {};
    var mark = arm.correct === true ? el("span", { class: "mark-ok", text: "✓" })
      : arm.correct === false ? el("span", { class: "mark-bad", text: "✗" }) : el("span", { class: "muted", text: "?" });
    return el("div", { class: "arm " + side },
      el("div", null, el("span", { class: "arm-title", text: side.toUpperCase() + " · " + s[side] + " " }), mark),
      el("div", { class: "parsed" }, el("span", { class: "muted", text: "parsed: " }),
        el("code", { text: arm.parsed == null ? "(none)" : arm.parsed })),
      el("pre", { class: "output", text: arm.output == null ? "(no output)" : arm.output }));
  }
  function sampleNode(sec, r) {
    var s = sec.s;
    var head = el("div", { class: "sample-head" },
      el("span", { class: "idx", text: "row " + r.index }),
      r.sample_id != null ? el("span", { class: "mono", text: "sample " + r.sample_id }) : null,
      r.slice != null ? el("span", null, el("span", { class: "muted", text: "slice: " }), r.slice) : null,
      el("span", null, el("span", { class: "muted", text: "gold: " }), el("b", { text: r.label })),
      el("span", { class: "badge " + r.outcome, text: OUTCOME_TEXT[r.outcome] || r.outcome }),
      runLink(s.a_run, "A run ↗", s.experiment_id), runLink(s.b_run, "B run ↗", s.experiment_id));
    var input = inputOf(s, r);
    var diff = el("details", { class: "diffbox" }, el("summary", null, "prompt diff A → B", legend()), diffNode(s, r.diff));
    if (!sec.commonDiff) diff.open = true;
    return el("div", {
      class: "sample", "data-index": r.index, "data-outcome": r.outcome, "data-label": r.label,
      "data-slice": r.slice == null ? null : r.slice
    },
      head,
      el("div", { class: "input", text: input == null ? "(input not in the report)" : input }),
      el("div", { class: "arms" }, armBox(s, r, "a"), armBox(s, r, "b")),
      diff);
  }
  function distinct(rows, field) {
    var counts = {};
    rows.forEach(function (r) { var v = r[field]; if (v != null) counts[v] = (counts[v] || 0) + 1; });
    return Object.keys(counts).sort().map(function (k) { return [k, counts[k]]; });
  }
  function selectFor(sec, name, label, options) {
    var sel = el("select", { "data-filter": name });
    sel.appendChild(el("option", { value: "", text: "all" }));
    options.forEach(function (o) { sel.appendChild(el("option", { value: o[0], text: o[1] })); });
    sel.addEventListener("change", function () { setFilter(sec, name, sel.value); });
    sec.selects[name] = sel;
    return el("label", null, label, sel);
  }
  function matches(sec, r) {
    var st = sec.state;
    if (st.label && r.label !== st.label) return false;
    if (st.slice && r.slice !== st.slice) return false;
    if (st.outcome && r.outcome !== st.outcome) return false;
    if (st.q) {
      if (r._text == null) {
        r._text = [r.index, r.sample_id, r.label, r.slice, inputOf(sec.s, r),
          r.a && r.a.output, r.a && r.a.parsed, r.b && r.b.output, r.b && r.b.parsed]
          .filter(function (x) { return x != null; }).join("\n").toLowerCase();
      }
      if (r._text.indexOf(st.q.toLowerCase()) < 0) return false;
    }
    return true;
  }
  function renderRows(sec) {
    var rows = (sec.s.rows || []).filter(function (r) { return matches(sec, r); });
    var pages = Math.max(1, Math.ceil(rows.length / PAGE));
    if (sec.state.page > pages) sec.state.page = pages;
    if (sec.state.page < 1) sec.state.page = 1;
    var start = (sec.state.page - 1) * PAGE;
    var frag = document.createDocumentFragment();
    rows.slice(start, start + PAGE).forEach(function (r) { frag.appendChild(sampleNode(sec, r)); });
    if (!rows.length) frag.appendChild(el("p", { class: "empty", text: "No rows match these filters." }));
    sec.list.replaceChildren(frag);
    sec.info.textContent = "page " + sec.state.page + " of " + pages + " · " + rows.length + " rows match";
    sec.prev.disabled = sec.state.page <= 1;
    sec.next.disabled = sec.state.page >= pages;
    for (var name in sec.selects) sec.selects[name].value = sec.state[name] || "";
    if (sec.search.value !== (sec.state.q || "")) sec.search.value = sec.state.q || "";
  }
  function turn(sec, step) {
    sec.state.page += step;
    renderRows(sec);
    writeHash();
    // a page turned from below its top starts at its first row, under the sticky filters
    var top = sec.list.getBoundingClientRect().top, bar = sec.filters.getBoundingClientRect().height;
    if (top < bar) window.scrollBy(0, top - bar - 8);
  }
  function setFilter(sec, name, value) {
    sec.state[name] = value;
    sec.state.page = 1;
    renderRows(sec);
    writeHash();
  }
  function blankState() { return { label: "", slice: "", outcome: "", q: "", page: 1 }; }

  function samples(root) {
    var list = doc.samples || [];
    if (!list.length) return;
    root.appendChild(el("h2", { id: "samples", text: "Rows where A and B disagree" }));
    root.appendChild(el("p", { class: "muted", text: "Per comparison: the rows where the two arms' correctness or parsed answers differ (a task without labels: the texts scored), " +
      PAGE + " to a page. The prompt diff shows what the variant changed (the row's own input is shown as ⟨row input⟩)." }));
    list.forEach(function (s) {
      var section = el("section", { class: "cmp", id: s.key, "data-key": s.key });
      var sec = { s: s, state: blankState(), el: section, selects: {} };
      section.appendChild(el("h3", null, s.task + " · " + s.model + ": ",
        el("span", { class: "arm-title", style: "color: var(--a)", text: s.a }), " vs ",
        el("span", { class: "arm-title", style: "color: var(--b)", text: s.b })));
      if (s.untested) {
        section.appendChild(el("p", { class: "cap-note", "data-untested": "1",
          text: "no result (" + s.untested + "): these are the rows both arms answered before it stopped, not a verdict" }));
      }
      var c = s.counts || {};
      section.appendChild(el("p", { class: "counts" },
        el("b", { class: "a", text: "A right " + (c.a_right || 0) }), " / ",
        el("b", { class: "b", text: "B right " + (c.b_right || 0) }), " / ",
        el("b", { text: "both wrong " + (c.both_wrong || 0) }),
        " of " + s.n_disagree + " disagreeing rows of " + s.n_rows + " rows (metric " + s.metric + ")",
        " ", runLink(s.a_run, "A run ↗", s.experiment_id), " ", runLink(s.b_run, "B run ↗", s.experiment_id)));
      if (s.n_shown < s.n_disagree) {
        section.appendChild(el("p", { class: "cap-note",
          text: "showing " + s.n_shown + " of " + s.n_disagree + " (cap " + s.cap + " per comparison)" }));
      }
      (s.slices || []).concat(s.classes || []).forEach(function (t) { section.appendChild(sliceTable(t)); });
      var rows = s.rows || [];
      var first = rows.length ? rows[0].diff : null;
      sec.commonDiff = first != null && rows.every(function (r) { return r.diff === first; });
      if (sec.commonDiff) {
        section.appendChild(el("div", { class: "common-diff" },
          el("b", { text: "Prompt diff A → B (the same on every row below)" }), legend(), diffNode(s, first)));
      }
      var filters = el("div", { class: "filters" });
      filters.appendChild(selectFor(sec, "label", "gold", distinct(rows, "label").map(function (o) {
        return [o[0], o[0] + " (" + o[1] + ")"];
      })));
      var slices = distinct(rows, "slice");
      if (slices.length) {
        filters.appendChild(selectFor(sec, "slice", "slice", slices.map(function (o) { return [o[0], o[0] + " (" + o[1] + ")"]; })));
      }
      var oc = {};
      rows.forEach(function (r) { oc[r.outcome] = (oc[r.outcome] || 0) + 1; });
      filters.appendChild(selectFor(sec, "outcome", "outcome", OUTCOMES.map(function (o) {
        return [o[0], o[1] + " (" + (oc[o[0]] || 0) + ")"];
      })));
      sec.search = el("input", { type: "search", "data-filter": "q", placeholder: "search input and outputs" });
      sec.search.addEventListener("input", function () { setFilter(sec, "q", sec.search.value); });
      filters.appendChild(sec.search);
      sec.prev = el("button", { type: "button", "data-page": "prev", text: "‹ Prev" });
      sec.next = el("button", { type: "button", "data-page": "next", text: "Next ›" });
      sec.info = el("span", { class: "page-info" });
      sec.prev.addEventListener("click", function () { turn(sec, -1); });
      sec.next.addEventListener("click", function () { turn(sec, 1); });
      filters.appendChild(el("span", { class: "pager" }, sec.prev, sec.info, sec.next));
      sec.filters = filters;
      section.appendChild(filters);
      sec.list = el("div", { class: "rows" });
      section.appendChild(sec.list);
      sections[s.key] = sec;
      root.appendChild(section);
    });
  }

  // ---- the hash: "#c3:outcome=b_right&label=Yes;c5:page=2" ----------------------------
  function decode(text) {
    try { return decodeURIComponent(text); } catch (e) { return text; }  // a hand-typed "%"
  }
  function parseHash(hash) {
    var out = {};
    String(hash || "").replace(/^#/, "").split(";").forEach(function (part) {
      if (!part) return;
      var colon = part.indexOf(":");
      var key = decode(colon < 0 ? part : part.slice(0, colon));
      var st = blankState();
      if (colon >= 0) {
        part.slice(colon + 1).split("&").forEach(function (kv) {
          var eq = kv.indexOf("=");
          if (eq < 0) return;
          var k = decode(kv.slice(0, eq)), v = decode(kv.slice(eq + 1).replace(/\+/g, " "));
          if (k === "page") st.page = parseInt(v, 10) || 1;
          else if (FILTERS.indexOf(k) >= 0) st[k] = v;
        });
      }
      out[key] = st;
    });
    return out;
  }
  function writeHash() {
    var parts = [];
    Object.keys(sections).forEach(function (key) {
      var st = sections[key].state, kv = [];
      FILTERS.forEach(function (f) { if (st[f]) kv.push(f + "=" + encodeURIComponent(st[f])); });
      if (st.page > 1) kv.push("page=" + st.page);
      if (kv.length) parts.push(encodeURIComponent(key) + ":" + kv.join("&"));
    });
    // a fragment-only change of this document's own URL: also allowed in MLflow's artifact
    // view (a sandboxed iframe of a blob: URL); where it is not, the filter just stays out of the URL
    var url = parts.length ? "#" + parts.join(";") : location.href.split("#")[0];
    try { history.replaceState(null, "", url); } catch (e) { /* no URL to keep it in */ }
  }
  function applyHash(scroll) {
    var wanted = parseHash(location.hash), first = null;
    Object.keys(wanted).forEach(function (key) {
      var sec = sections[key];
      if (!sec) return;
      sec.state = wanted[key];
      renderRows(sec);
      if (first == null) first = sec;
    });
    if (scroll && first) first.el.scrollIntoView();
    else if (scroll && location.hash.length > 1 && !first) {
      var target = document.getElementById(location.hash.slice(1));
      if (target) target.scrollIntoView();
    }
  }

  function main() {
    var root = document.getElementById("report");
    try {
      doc = JSON.parse(document.getElementById("report-data").textContent);
      root.replaceChildren();
      header(root);
      comparisonTable(root);
      figures(root);
      sequential(root);
      samples(root);
      Object.keys(sections).forEach(function (k) { renderRows(sections[k]); });
      applyHash(true);
      window.addEventListener("hashchange", function () { applyHash(true); });
      window.__reportRenderMs = performance.now();
      document.body.dataset.ready = "1";
    } catch (e) {
      root.replaceChildren(el("p", { class: "empty", text: "This report could not be shown: " + e }));
      document.body.dataset.error = String(e && e.stack || e);
      document.body.dataset.ready = "error";
    }
  }
  main();
})();
