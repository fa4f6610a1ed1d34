// The page of composo report and composo view: renders the page's data (a JSON element) as
// text. Every string from a results file or a dataset reaches the page through textContent (the
// el() helper below); nothing is parsed as markup, and nothing is loaded from outside.
(function () {
  "use strict";

  var source = document.getElementById("composo-data");
  if (!source) return;
  var DATA = JSON.parse(source.textContent);
  var VIEW = DATA.mode === "view";
  var CRIT = DATA.criteria;
  var PAGE_SIZES = [25, 50, 100, 500];
  var state = {
    // the item table shows the latest run (a report's --baseline, a viewer's first file, come first)
    run: DATA.runs.length - 1, search: "", criterion: "", min: "", max: "", status: "", tag: "",
    sort: "key", desc: false, page: 0, size: 25,
  };

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "text") node.textContent = String(v);
        else if (k === "class") node.className = v;
        else if (k.slice(0, 2) === "on") node.addEventListener(k.slice(2), v);
        else node.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }

  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function num(v, signed, digits) {
    if (v === null || v === undefined) return "–";
    var s = Number(v).toFixed(digits || 3);
    return signed && v >= 0 ? "+" + s : s;
  }

  function failed(cell) { return cell[1] !== null && cell[1] !== undefined; }

  // a long text shows its start; the rest unfolds
  function fold(text, n, what) {
    if (!text || text.length <= n) return el("span", { class: "cv-text", text: text || "" });
    return el("details", { class: "cv-fold" },
      el("summary", { text: text.slice(0, n - 20) + "… (full " + what + ")" }),
      el("div", { class: "cv-text", text: text }));
  }

  function color(score) {
    var stops = [[0, [194, 65, 12]], [0.5, [217, 159, 6]], [1, [21, 128, 61]]];
    for (var i = 1; i < stops.length; i++) {
      if (score <= stops[i][0]) {
        var a = stops[i - 1], b = stops[i], t = (score - a[0]) / (b[0] - a[0]);
        var c = a[1].map(function (x, j) { return Math.round(x + (b[1][j] - x) * t); });
        return "rgb(" + c.join(",") + ")";
      }
    }
    return "rgb(21,128,61)";
  }

  function pill(cell, text) {
    if (!cell) return el("span", { class: "cv-pill cv-none", text: "–", title: "not evaluated" });
    if (failed(cell)) return el("span", { class: "cv-pill cv-error", text: "error", title: cell[1] });
    if (cell[0] === null) {
      return el("span", { class: "cv-pill cv-na", text: "n/a", title: "not applicable" });
    }
    var p = el("span", { class: "cv-pill", text: text || Number(cell[0]).toFixed(2) });
    p.style.background = color(cell[0]);
    return p;
  }

  // a criterion's mean (a pass rate for pass/fail criteria); "no data" when nothing was scored
  function meanPill(c) {
    var value = c.binary ? c.pass_rate : c.mean;
    if (value === null) return el("span", { class: "cv-pill cv-na", text: "no data", title: "no scored items" });
    return pill([value, null], c.binary ? "pass " + Math.round(100 * value) + "%" : null);
  }

  function label(i) { return CRIT[i] ? CRIT[i].label : "?"; }

  function critIndex(text) {
    for (var i = 0; i < CRIT.length; i++) if (CRIT[i].text === text) return i;
    return -1;
  }

  // -- the runs --------------------------------------------------------------------------------

  function bars(figures) {
    var top = Math.max.apply(null, figures.bins.concat([1]));
    var box = el("div", { class: "cv-bars", role: "img", "aria-label": "score distribution" });
    var bins = figures.binary ? [figures.bins[0], figures.bins[figures.bins.length - 1]]
      : figures.bins;
    bins.forEach(function (n, i) {
      var at = figures.binary ? i : (i + 0.5) / bins.length;
      var bar = el("div", { class: "cv-bar", title: (figures.binary ? "score " + i
        : "scores " + (i / 10).toFixed(1) + " to " + ((i + 1) / 10).toFixed(1)) + ": " + n });
      bar.style.height = Math.max(n ? 3 : 0, Math.round(60 * n / top)) + "px";
      bar.style.background = color(at);
      box.appendChild(el("div", { class: "cv-slot" }, el("span", { text: n || "" }), bar));
    });
    return box;
  }

  var LEGEND = "scored: items with a score, which mean, median, min and max cover; n/a: the " +
    "criterion did not apply; errors: not judged (re-run composo evaluate with the same -o to " +
    "retry them); no data: nothing scored. Pass/fail criteria show their pass rate.";

  function headRow(names) { return el("tr", null, names.map(function (h) { return el("th", { text: h }); })); }

  function runSection(run, n) {
    var section = el("section", { class: "cv-card" + (run.dev ? " cv-dev" : ""), id: "cv-run-" + n },
      el("h2", { text: (DATA.runs.length > 1 ? "Run " + (n + 1) + ": " : "Run: ") + run.name }),
      el("table", { class: "cv-facts" }, run.facts.concat([["items", run.items],
        ["criteria", run.criteria.length]]).map(function (f) {
        return el("tr", null, el("td", { text: f[0] }), el("td", { text: f[1] }));
      })),
      run.dataset_note ? el("p", { class: "cv-sub", text: run.dataset_note }) : null,
      el("table", { class: "cv-criteria" }, headRow(["criterion", "mean", "median", "min", "max",
        "scored", "n/a", "errors", "distribution"]),
        run.criteria.map(function (c) {
          return el("tr", null,
            el("td", null, el("b", { text: c.label, title: c.text }),
              c.label !== c.text ? el("div", { class: "cv-sub", text: c.text }) : null),
            el("td", null, meanPill(c)),
            ["median", "min", "max"].map(function (k) {  // a pass rate says it for pass/fail
              return el("td", { text: c.binary ? "–" : num(c[k], false, 2) });
            }), el("td", { text: c.scored }),
            el("td", { text: c.na }), el("td", { class: c.errors ? "cv-err" : "", text: c.errors }),
            el("td", null, bars(c)));
        })),
      el("p", { class: "cv-sub", text: LEGEND }),
      lowest(run, n), errors(run, n));
    var tags = Object.keys(run.by_tag || {}).sort();
    if (tags.length) {
      section.appendChild(el("h3", { text: "By tag" }));
      section.appendChild(el("p", { class: "cv-sub", text: "mean score of the scored items with " +
        "each tag value (their number in brackets)" }));
      tags.forEach(function (k) {
        var values = run.by_tag[k];
        section.appendChild(el("table", { class: "cv-tags" },
          el("tr", null, el("th", { text: k }), run.criteria.map(function (c) {
            return el("th", { text: c.label });
          })),
          Object.keys(values).sort().map(function (v) {
            return el("tr", null, el("td", { text: v }), run.criteria.map(function (c) {
              var got = values[v][c.text];
              return el("td", null, got ? [pill([got[0], null]), " (" + got[1] + ")"] : "–");
            }));
          })));
      });
    }
    if (run.set_aside) {
      section.appendChild(el("h3", { class: "cv-err", text: "Rows set aside" }));
      section.appendChild(el("p", { class: "cv-err", text: run.set_aside + " row(s) of the " +
        "results file are not results and are counted nowhere on this page; fix or remove them " +
        "(the command exited with status 4)" }));
      section.appendChild(el("table", { class: "cv-problems" }, headRow(["line", "id", "criterion", "problem"]),
        run.problems.map(function (p) {
          return el("tr", null, el("td", { text: p.line }), el("td", { text: p.id || "" }),
            el("td", { text: p.criterion || "" }), el("td", { class: "cv-err", text: p.problem }));
        })));
    }
    return section;
  }

  // the question and the judged answer of an item, when the page holds its conversation
  function questionAnswer(key) {
    var conv = DATA.conversations && DATA.conversations[key];
    if (!conv || !conv.messages) return null;
    var said = conv.messages, at = -1, q = "";
    said.forEach(function (m, i) { if (m.role === "assistant") at = i; });
    said.slice(0, at < 0 ? said.length : at).forEach(function (m) { if (m.role === "user") q = m.text; });
    var a = at < 0 ? "" : said[at].text + (said[at].calls.length ? " [tool calls: " +
      said[at].calls.map(function (c) { return c.name + "(" + c.arguments + ")"; }).join(", ") + "]" : "");
    return el("td", { class: "cv-qa" }, el("div", null, el("b", { text: "Q " }), fold(q, 280, "question")),
      el("div", null, el("b", { text: "A " }), fold(a.trim(), 280, "answer")));
  }

  function lowest(run, n) {
    if (!DATA.lowest) return null;
    var blocks = run.criteria.filter(function (c) { return c.scored; }).map(function (c) {
      var i = critIndex(c.text), mixed = Object.keys(c.judges).length > 1;
      var found = DATA.items.filter(function (it) {
        var cell = it.runs[n][i];
        return cell && !failed(cell) && cell[0] !== null;
      }).sort(function (a, b) { return a.runs[n][i][0] - b.runs[n][i][0]; }).slice(0, DATA.lowest);
      return el("div", { class: "cv-lowest" }, el("h4", { text: c.label, title: c.text }),
        el("table", null, found.map(function (it) {
          var cell = it.runs[n][i];
          return el("tr", null, el("td", null, idLink(it.key)),
            el("td", null, pill(cell), mixed ? el("div", { class: "cv-sub", text: cell[3] || "unknown" }) : null),
            questionAnswer(it.key), el("td", null, fold(cell[2], 320, "explanation")));
        })));
    });
    return blocks.length ? [el("h3", { text: "Lowest scores" }), blocks] : null;
  }

  // every error of the run, one line per item and error with the criteria it hit
  function errors(run, n) {
    var groups = [], seen = {}, total = 0;
    DATA.items.forEach(function (it) {
      Object.keys(it.runs[n]).forEach(function (k) {
        var cell = it.runs[n][k];
        if (!failed(cell)) return;
        total += 1;
        var id = it.key + "\n" + cell[1];
        if (!seen[id]) groups.push(seen[id] = { key: it.key, error: cell[1], criteria: [] });
        seen[id].criteria.push(label(Number(k)));
      });
    });
    if (!total) return null;
    return [el("h3", { class: "cv-err", text: "Errors" }),
      el("p", { class: "cv-sub", text: total + " pair(s) could not be evaluated; re-run composo " +
        "evaluate with the same -o to retry them" + (groups.length > 20 ? " (the first 20 " +
        "shown: the item table's errors filter lists every one)" : "") }),
      el("table", { class: "cv-errors" }, headRow(["item", "criterion", "error"]),
        groups.slice(0, 20).map(function (g) {
          return el("tr", null, el("td", null, idLink(g.key)), el("td", { text: g.criteria.join(", ") }),
            el("td", { class: "cv-err", text: g.error }));
        }))];
  }

  // -- what changed between runs ---------------------------------------------------------------

  function changesSection(change) {
    var section = el("section", { class: "cv-card cv-changes" },
      el("h2", { text: "Changes: " + change.run + " against " + (change.base || "the first run") }));
    if (change.error) { section.appendChild(el("p", { class: "cv-err", text: change.error })); return section; }
    section.appendChild(el("p", { class: "cv-sub", text: "items paired by " + change.paired_by +
      "; the difference is the later run's score minus the first's, with a bootstrap 95% interval" }));
    section.appendChild(el("table", { class: "cv-summary" },
      el("tr", null, ["criterion", "first mean", "later mean", "paired difference", "95% interval",
        "improved", "regressed", "unchanged"].map(function (h) { return el("th", { text: h }); })),
      change.summary.map(function (s) {
        return el("tr", null, el("td", { text: label(critIndex(s.criterion)), title: s.criterion }),
          el("td", { text: num(s.base_mean) }), el("td", { text: num(s.new_mean) }),
          el("td", { class: s.high !== null && s.high < 0 ? "cv-err" : "", text: num(s.diff, true) +
            " over " + s.pairs }),
          el("td", { text: "[" + num(s.low, true) + ", " + num(s.high, true) + "]" }),
          el("td", { text: s.improved }), el("td", { text: s.regressed }),
          el("td", { text: s.unchanged }));
      })));
    var order = { by: "diff" };
    var body = el("tbody");
    function fill() {
      clear(body);
      var list = change.changed.slice();
      if (order.by === "size") list.sort(function (a, b) { return Math.abs(b.diff) - Math.abs(a.diff); });
      else if (order.by === "up") list.sort(function (a, b) { return b.diff - a.diff; });
      list.forEach(function (c) {
        body.appendChild(el("tr", { class: "cv-change" },
          el("td", null, idLink(c.key)),
          el("td", { text: label(critIndex(c.criterion)), title: c.criterion }),
          el("td", null, pill([c.base, null]), " → ", pill([c.new, null])),
          el("td", { class: "cv-diff " + (c.diff < 0 ? "cv-err" : "cv-good"), text: num(c.diff, true) })));
      });
    }
    var pick = el("select", { "aria-label": "order of changes", onchange: function () {
      order.by = pick.value; fill(); } },
      el("option", { value: "diff", text: "most regressed first" }),
      el("option", { value: "up", text: "most improved first" }),
      el("option", { value: "size", text: "largest change first" }));
    section.appendChild(el("h3", { text: change.changed.length + " item score(s) changed" }));
    section.appendChild(el("div", { class: "cv-controls" }, pick));
    section.appendChild(el("table", { class: "cv-changed" },
      el("thead", null, el("tr", null, ["item", "criterion", "score", "difference"].map(function (h) {
        return el("th", { text: h });
      }))), body));
    fill();
    return section;
  }

  // -- every item: search, filter, sort, pages ------------------------------------------------

  function cellsOf(item) { return item.runs[state.run] || {}; }

  function matches(item) {
    var cells = cellsOf(item);
    var keys = Object.keys(cells);
    if (!keys.length) return false;
    var q = state.search.trim().toLowerCase();
    if (q) {
      var hay = [item.key].concat(Object.keys(item.tags).map(function (k) { return k + "=" + item.tags[k]; }));
      keys.forEach(function (k) { hay.push(cells[k][2] || ""); hay.push(cells[k][1] || ""); });
      if (hay.join("\n").toLowerCase().indexOf(q) < 0) return false;
    }
    if (state.tag && (item.tags[state.tag.split("=")[0]] !== state.tag.slice(state.tag.indexOf("=") + 1))) return false;
    var which = state.criterion === "" ? keys : [state.criterion].filter(function (k) { return cells[k]; });
    if (!which.length) return false;
    var lo = state.min === "" ? null : Number(state.min), hi = state.max === "" ? null : Number(state.max);
    return which.some(function (k) {
      var c = cells[k], s = c[0], err = c[1] !== null && c[1] !== undefined;
      if (state.status === "errors" && !err) return false;
      if (state.status === "na" && (err || s !== null)) return false;
      if (state.status === "pass" && (err || s === null || s < 0.5)) return false;
      if (state.status === "fail" && (err || s === null || s >= 0.5)) return false;
      if ((lo !== null || hi !== null) && (err || s === null)) return false;
      if (lo !== null && s < lo) return false;
      if (hi !== null && s > hi) return false;
      return true;
    });
  }

  function sortValue(item) {
    if (state.sort === "key") return item.key;
    var c = cellsOf(item)[state.sort];
    return c && c[0] !== null && (c[1] === null || c[1] === undefined) ? c[0] : null;
  }

  function sorted(list) {
    var sign = state.desc ? -1 : 1;
    return list.slice().sort(function (a, b) {
      var x = sortValue(a), y = sortValue(b);
      if (x === y) return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      if (x === null) return 1;
      if (y === null) return -1;
      if (state.sort === "key") {
        return sign * x.localeCompare(y, undefined, { numeric: true });
      }
      return sign * (x - y);
    });
  }

  var table = { body: null, head: null, status: null, pager: null };

  // an item's link is the page's address with #item=KEY: it opens the item, and can be shared
  function idLink(key) {
    return el("a", { href: "#item=" + encodeURIComponent(key), class: "cv-id", text: key });
  }

  var opened = null;

  function fromAddress() {
    var hash = location.hash, key = null;
    if (hash.slice(0, 6) === "#item=") {
      try { key = decodeURIComponent(hash.slice(6)); } catch (e) { key = null; }
    }
    if (key === null) { panel.hidden = true; opened = null; }
    else if (key !== opened) openItem(key);
  }

  function reviewMark(key, crit) {
    var r = VIEW && DATA.reviews[state.run] && DATA.reviews[state.run][key];
    var got = r && r[CRIT[crit].text];
    if (!got) return null;
    return el("span", { class: "cv-reviewed", title: "reviewed: " + (got.verdict || "own score"),
      text: got.verdict === "agree" ? " ✓" : got.verdict === "disagree" ? " ✗" : " ✎" });
  }

  function drawTable() {
    var shown = sorted(DATA.items.filter(matches));
    var pages = Math.max(1, Math.ceil(shown.length / state.size));
    state.page = Math.min(state.page, pages - 1);
    var slice = shown.slice(state.page * state.size, (state.page + 1) * state.size);
    clear(table.body);
    slice.forEach(function (item) {
      var cells = cellsOf(item);
      table.body.appendChild(el("tr", { class: "cv-item" },
        el("td", null, idLink(item.key)),
        CRIT.map(function (c, i) {
          return el("td", null, pill(cells[String(i)]), reviewMark(item.key, i));
        }),
        el("td", { class: "cv-sub", text: Object.keys(item.tags).map(function (k) {
          return k + "=" + item.tags[k]; }).join(" ") })));
    });
    table.status.textContent = shown.length + " of " + DATA.items.filter(function (i) {
      return Object.keys(cellsOf(i)).length; }).length + " item(s) · page " + (state.page + 1) +
      " of " + pages;
    table.prev.disabled = state.page === 0;
    table.next.disabled = state.page >= pages - 1;
  }

  function control(tag, attrs, key, options) {
    var node = el(tag, attrs, (options || []).map(function (o) {
      return el("option", { value: o[0], text: o[1] });
    }));
    if (state[key] !== "") node.value = String(state[key]);
    node.addEventListener(tag === "select" ? "change" : "input", function () {
      state[key] = key === "size" || key === "run" ? Number(node.value) : node.value;
      state.page = 0;
      drawTable();
    });
    return node;
  }

  function itemsSection() {
    var tagValues = {};
    DATA.items.forEach(function (item) {
      Object.keys(item.tags).forEach(function (k) { tagValues[k + "=" + item.tags[k]] = true; });
    });
    var controls = el("div", { class: "cv-controls" },
      control("input", { type: "search", id: "cv-search", placeholder: "search ids, explanations, tags",
        "aria-label": "search items" }, "search"),
      DATA.runs.length > 1 ? control("select", { "aria-label": "run", id: "cv-run" }, "run",
        DATA.runs.map(function (r, i) { return [String(i), "run " + (i + 1) + ": " + r.name]; })) : null,
      control("select", { "aria-label": "criterion", id: "cv-criterion" }, "criterion",
        [["", "every criterion"]].concat(CRIT.map(function (c, i) { return [String(i), c.label]; }))),
      control("input", { type: "number", min: 0, max: 1, step: 0.05, placeholder: "min score",
        "aria-label": "lowest score", id: "cv-min" }, "min"),
      control("input", { type: "number", min: 0, max: 1, step: 0.05, placeholder: "max score",
        "aria-label": "highest score", id: "cv-max" }, "max"),
      control("select", { "aria-label": "status", id: "cv-status" }, "status",
        [["", "any result"], ["pass", "pass (≥ 0.5)"], ["fail", "fail (< 0.5)"],
          ["na", "not applicable"], ["errors", "errors"]]),
      control("select", { "aria-label": "tag", id: "cv-tag" }, "tag",
        [["", "any tag"]].concat(Object.keys(tagValues).sort().map(function (t) { return [t, t]; }))),
      control("select", { "aria-label": "page size", id: "cv-size" }, "size",
        PAGE_SIZES.map(function (n) { return [String(n), n + " a page"]; })));
    function head(name, key) {
      return el("th", null, el("button", { class: "cv-sort", type: "button", "data-sort": key,
        text: name, title: "sort", onclick: function () {
          if (state.sort === key) state.desc = !state.desc; else { state.sort = key; state.desc = false; }
          drawTable();
        } }));
    }
    table.body = el("tbody");
    table.status = el("span", { class: "cv-sub", id: "cv-count" });
    table.prev = el("button", { type: "button", text: "‹ previous", onclick: function () {
      state.page -= 1; drawTable(); } });
    table.next = el("button", { type: "button", text: "next ›", onclick: function () {
      state.page += 1; drawTable(); } });
    return el("section", { class: "cv-card", id: "cv-items" },
      el("h2", { text: "Every item" }), controls,
      el("table", { class: "cv-table" },
        el("thead", null, el("tr", null, head("item", "key"),
          CRIT.map(function (c, i) { return head(c.label, String(i)); }), el("th", { text: "tags" }))),
        table.body),
      el("div", { class: "cv-pager" }, table.prev, table.status, table.next));
  }

  // -- one item --------------------------------------------------------------------------------

  var panel = null;

  function messageNode(m) {
    return el("div", { class: "cv-msg cv-" + String(m.role).replace(/[^a-z]/g, "") },
      el("div", { class: "cv-role", text: m.role + (m.result_of ? " (result of " + m.result_of + ")" : "") }),
      m.text ? el("div", { class: "cv-text", text: m.text }) : null,
      (m.calls || []).map(function (c) {
        return el("div", { class: "cv-call" }, el("span", { class: "cv-toolname", text: c.name }),
          el("code", { class: "cv-args", text: c.arguments }));
      }));
  }

  function agentNode(node, depth) {
    return el("div", { class: "cv-agent" },
      el("div", { class: "cv-agent-name", text: node.name + " (" + node.id + ")" }),
      node.steps.map(function (s, i) {
        return el("div", { class: "cv-step" }, el("div", { class: "cv-sub", text: "LLM call " + (i + 1) }),
          s.input.map(messageNode), s.output.map(messageNode));
      }),
      node.children.map(function (c) { return agentNode(c, depth + 1); }));
  }

  function conversationNode(conv) {
    if (!conv) return el("p", { class: "cv-sub", text: "the conversation is not available (the dataset was not found; pass --data)" });
    if (conv.trace) {
      return el("div", { class: "cv-trace" }, el("h3", { text: "Agent tree" }),
        el("p", { class: "cv-sub", text: "the results file holds the trace's overall score; " +
          "per-agent scores are in the API's trace response, not in its rows" }),
        agentNode(conv.trace, 0));
    }
    return el("div", { class: "cv-conv" },
      conv.tools && conv.tools.length ? el("p", { class: "cv-sub", text: "tools offered: " + conv.tools.join(", ") }) : null,
      conv.messages.map(messageNode));
  }

  function reviewForm(item, crit, cell) {
    var run = state.run, text = CRIT[crit].text;
    var old = (DATA.reviews[run] && DATA.reviews[run][item.key] && DATA.reviews[run][item.key][text]) || {};
    var verdict = el("select", { "aria-label": "verdict", class: "cv-verdict" },
      el("option", { value: "", text: "no verdict" }),
      el("option", { value: "agree", text: "agree with the judge" }),
      el("option", { value: "disagree", text: "disagree" }));
    verdict.value = old.verdict || "";
    var own = el("input", { type: "number", min: 0, max: 1, step: CRIT[crit].binary ? 1 : 0.05,
      class: "cv-own", placeholder: "your score", "aria-label": "your score" });
    if (old.score !== null && old.score !== undefined) own.value = String(old.score);
    var comment = el("textarea", { class: "cv-comment", rows: 2, placeholder: "comment", "aria-label": "comment" });
    comment.value = old.comment || "";
    var said = el("span", { class: "cv-saved", role: "status" });
    var save = el("button", { type: "button", class: "cv-save", text: "save review", onclick: function () {
      var body = { run: run, id: item.key, criterion: text, verdict: verdict.value || null,
        score: own.value === "" ? null : Number(own.value), comment: comment.value };
      said.textContent = "saving…";
      fetch("api/review", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) }).then(function (r) {
        return r.json().then(function (answer) { return { ok: r.ok, answer: answer }; });
      }).then(function (got) {
        if (!got.ok) { said.textContent = "not saved: " + got.answer.detail; return; }
        DATA.reviews[run] = DATA.reviews[run] || {};
        DATA.reviews[run][item.key] = DATA.reviews[run][item.key] || {};
        DATA.reviews[run][item.key][text] = got.answer;
        said.textContent = "saved";
        drawTable();
      }, function () { said.textContent = "not saved: the viewer did not answer"; });
    } });
    var hint = CRIT[crit].binary ? null : el("div", { class: "cv-sub",
      text: "disagreeing counts in composo agreement once you give your own score" });
    return el("div", { class: "cv-review" }, verdict, own, comment, save, said, hint);
  }

  function openItem(key) {
    var item = DATA.items.filter(function (i) { return i.key === key; })[0];
    if (!item) return;
    opened = key;
    clear(panel);
    panel.hidden = false;
    var scores = el("div", { class: "cv-scores" });
    CRIT.forEach(function (c, i) {
      DATA.runs.forEach(function (run, n) {
        var cell = item.runs[n][String(i)];
        if (!cell) return;
        scores.appendChild(el("div", { class: "cv-crit" },
          el("div", { class: "cv-crit-head" }, pill(cell), " ",
            el("b", { text: c.label, title: c.text }),
            DATA.runs.length > 1 ? el("span", { class: "cv-sub", text: " · run " + (n + 1) + ": " + run.name }) : null),
          c.label !== c.text ? el("div", { class: "cv-sub", text: c.text }) : null,
          cell[3] ? el("div", { class: "cv-sub", text: "judge " + cell[3] +
            (cell[4] ? ", " + (cell[4] === "cache" ? "from the result cache" : cell[4]) : "") }) : null,
          cell[1] ? el("div", { class: "cv-err cv-expl", text: cell[1] }) : null,
          el("div", { class: "cv-expl", text: cell[2] || "" }),
          VIEW && n === state.run ? reviewForm(item, i, cell) : null));
      });
    });
    var conv = el("div", { class: "cv-conv-box" }, el("p", { class: "cv-sub", text: "loading the conversation…" }));
    panel.appendChild(el("div", { class: "cv-item-head" },
      el("h2", { text: "Item " + item.key }),
      el("a", { class: "cv-close", href: "#cv-items", text: "back to the list" })));
    if (Object.keys(item.tags).length) {
      panel.appendChild(el("p", { class: "cv-sub", text: Object.keys(item.tags).map(function (k) {
        return k + "=" + item.tags[k]; }).join(" · ") }));
    }
    panel.appendChild(el("div", { class: "cv-item-body" },
      el("div", null, el("h3", { text: "Conversation" }), conv),
      el("div", null, el("h3", { text: "The judge" }), scores)));
    panel.scrollIntoView();
    function show(c) { clear(conv); conv.appendChild(conversationNode(c)); }
    if (DATA.conversations) show(DATA.conversations[key]);
    else {
      fetch("api/item?key=" + encodeURIComponent(key)).then(function (r) { return r.json(); })
        .then(function (got) { show(got.conversation); },
          function () { clear(conv); conv.appendChild(el("p", { class: "cv-err", text: "the viewer did not answer" })); });
    }
  }

  // -- the page --------------------------------------------------------------------------------

  var root = document.getElementById("composo-app");
  clear(root);
  root.appendChild(el("h1", { text: DATA.title }));
  root.appendChild(el("p", { class: "cv-sub", text: DATA.note }));
  DATA.runs.forEach(function (run, n) { root.appendChild(runSection(run, n)); });
  DATA.changes.forEach(function (c) { root.appendChild(changesSection(c)); });
  root.appendChild(itemsSection());
  panel = el("section", { class: "cv-card cv-panel", id: "cv-item" });
  panel.hidden = true;
  root.appendChild(panel);
  drawTable();
  window.addEventListener("hashchange", fromAddress);
  fromAddress();
})();
