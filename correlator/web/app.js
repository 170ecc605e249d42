// The correlator's timeline page: vanilla JS and SVG, no build step, nothing fetched from
// elsewhere (the page works offline).
//
// Safety rule: every string that comes from the API (identifiers, log lines, attributes) goes
// into the document through textContent, createTextNode or setAttribute on a known-inert
// attribute. Nothing here assigns innerHTML/outerHTML or calls insertAdjacentHTML, so hostile
// evidence is shown, never run.
(() => {
  "use strict";

  // Search order for a bare value (DESIGN §6 identifiers, most specific incident first).
  const SEARCH_ORDER = [
    "allocation_id",
    "correlation_id",
    "workflow_id",
    "node_id",
    "node_instance_id",
  ];
  // Value shapes the services mint; "ni-" must be tested before "n-".
  const SHAPES = [
    [/^ni-/, "node_instance_id"],
    [/^n-/, "node_id"],
    [/^wf-/, "workflow_id"],
    [/^a-/, "allocation_id"],
    [/^c-/, "correlation_id"],
  ];
  const BASE_LAYERS = ["node", "ingress", "api", "workflow", "db"];
  const EXTRA_LAYERS = ["provider", "projection"];
  const LEVELS = ["debug", "info", "warning", "error", "critical"];
  const SVGNS = "http://www.w3.org/2000/svg";
  const TOKEN_KEY = "correlator.token";

  // Geometry of the lanes (px).
  const LABEL_W = 118;
  const RIGHT_PAD = 14;
  const AXIS_H = 34;
  const MARKER_ROW_H = 18;
  const FOOTER_H = 20;
  const LANE_MIN_H = 42;
  const ROW_H = 18;
  const MARK_R = 6;
  const MIN_SEP = 2 * MARK_R + 3;
  const MAX_ROWS = 8;
  const SEGMENT_MIN_W = 40;
  const SEGMENT_PAD = 12;
  const BREAK_W = 56;
  const TICK_MIN_PX = 90;
  const TICK_CHAR_PX = 7; // an 11px monospace digit is ~6.6px wide
  const LABEL_CHAR_PX = 8; // an 11.5px bold sans-serif character is 7-8px wide
  const NS_PER_MS = 1e6;
  // Quiet stretches longer than this, and than BREAK_SHARE of the time still drawn linearly,
  // are drawn BREAK_W wide (at most MAX_BREAKS of them).
  const BREAK_MIN_NS = 10e9;
  const BREAK_SHARE = 0.25;
  const MAX_BREAKS = 5;
  const DAY_MS = 864e5;
  const IDS_SHOWN = 8; // identifiers of one kind shown before a "more" button
  const TICK_STEPS_MS = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5,
    18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5,
  ];

  const $ = (id) => document.getElementById(id);

  const state = {
    query: null, // {key, value} as searched (key null: bare value)
    seed: null, // {key, value} as resolved
    data: null,
    byHash: new Map(),
    selected: null,
    zoom: null, // [lo_ns, hi_ns] or null
    scale: null,
    searchSeq: 0,
    retries: [],
    lastWidth: 0,
  };

  // ---------------------------------------------------------------- DOM helpers (text only)

  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, ...children);
    return node;
  }

  function s(tag, attrs, ...children) {
    const node = document.createElementNS(SVGNS, tag);
    setAttrs(node, attrs);
    append(node, ...children);
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "class") node.setAttribute("class", value);
      else if (name === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
  }

  function append(node, ...children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, ...child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(String(child)));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // ---------------------------------------------------------------- formatting

  function eventTime(event) {
    return Number(event.corrected_ts_ns ?? event.ts_ns);
  }

  function isoOf(ns) {
    return new Date(Math.floor(ns / NS_PER_MS)).toISOString();
  }

  function clock(ns, withMs) {
    const iso = isoOf(ns);
    return withMs ? iso.slice(11, 23) : iso.slice(11, 19);
  }

  function duration(seconds) {
    const sign = seconds < 0 ? "−" : "";
    let left = Math.abs(seconds);
    if (left < 1) return `${sign}${Math.round(left * 1000)} ms`;
    if (left < 60) return `${sign}${left.toFixed(left < 10 ? 2 : 1)} s`;
    const parts = [];
    for (const [unit, size] of [
      ["d", 86400],
      ["h", 3600],
      ["m", 60],
      ["s", 1],
    ]) {
      const n = Math.floor(left / size);
      if (n || (unit === "s" && !parts.length)) parts.push(`${n}${unit}`);
      left -= n * size;
      if (parts.length === 2) break;
    }
    return sign + parts.join(" ");
  }

  function idText(key, value) {
    return `${key}=${value}`;
  }

  // ---------------------------------------------------------------- the API

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
      this.detail = detail;
    }
  }

  async function api(path) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch(path, { headers, cache: "no-store" });
    } catch (err) {
      throw new ApiError(0, `cannot reach the correlator (${err.message})`);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      body = null;
    }
    if (!response.ok) {
      let detail = response.statusText || `HTTP ${response.status}`;
      if (body && typeof body.detail === "string") detail = body.detail;
      else if (body && body.detail !== undefined) detail = JSON.stringify(body.detail);
      throw new ApiError(response.status, detail);
    }
    return body;
  }

  function timelinePath(key, value) {
    return `/v1/timeline?${new URLSearchParams([[key, value]])}`;
  }

  // ---------------------------------------------------------------- queries and the URL

  function parseQuery(text) {
    const value = text.trim();
    if (!value) return null;
    // Identifier values never hold "=" (agent_logging refuses it), so "word=rest" is KEY=VALUE;
    // an unknown key goes to the API, whose 400 names the accepted ones.
    const match = /^([A-Za-z_]+)\s*=\s*(.*)$/.exec(value);
    if (match) return { key: match[1], value: match[2].trim() };
    return { key: null, value };
  }

  function candidates(value) {
    const shaped = SHAPES.find(([pattern]) => pattern.test(value));
    if (!shaped) return SEARCH_ORDER.slice();
    return [shaped[1], ...SEARCH_ORDER.filter((key) => key !== shaped[1])];
  }

  function urlFor(query) {
    const params = new URLSearchParams();
    if (query.key && SEARCH_ORDER.includes(query.key)) params.set(query.key, query.value);
    else params.set("q", query.key ? idText(query.key, query.value) : query.value);
    return `/?${params}`;
  }

  function queryFromUrl() {
    const params = new URLSearchParams(window.location.search);
    for (const key of SEARCH_ORDER) {
      if (params.has(key)) return { key, value: params.get(key) };
    }
    if (params.has("q")) return parseQuery(params.get("q"));
    return null;
  }

  function sameQuery(a, b) {
    return !!a && !!b && a.key === b.key && a.value === b.value;
  }

  // ---------------------------------------------------------------- status, errors, token

  function setStatus(text) {
    $("status").textContent = text;
  }

  function showError(text) {
    const box = $("error");
    clear(box);
    if (text) append(box, h("p", { text }));
  }

  function needToken(detail, retry) {
    state.retries.push(retry);
    const had = sessionStorage.getItem(TOKEN_KEY);
    $("auth-message").textContent = had
      ? `The token was refused: ${detail}`
      : `Reading needs a bearer token: ${detail}`;
    const form = $("auth");
    if (form.hidden) {
      form.hidden = false;
      $("token").value = "";
      $("token").focus();
    }
  }

  function onTokenSubmit(evt) {
    evt.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("auth").hidden = true;
    $("forget-token").hidden = false;
    const retries = state.retries.splice(0);
    $("q").focus();
    retries.forEach((retry) => retry());
  }

  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
    $("forget-token").hidden = true;
    setStatus("Token forgotten.");
  }

  // ---------------------------------------------------------------- search

  function navigate(query) {
    if (!query) return;
    $("q").value = query.key ? idText(query.key, query.value) : query.value;
    const url = urlFor(query);
    if (window.location.pathname + window.location.search !== url) {
      window.history.pushState({ query }, "", url);
    }
    search(query);
  }

  async function search(query) {
    const seq = ++state.searchSeq;
    state.query = query;
    showError("");
    setStatus(`Looking for ${query.key ? idText(query.key, query.value) : query.value}…`);
    $("main").setAttribute("aria-busy", "true");
    try {
      const found = await resolve(query);
      if (seq !== state.searchSeq) return; // a newer search won
      const resolved = { key: found.key, value: query.value };
      if (!query.key) {
        window.history.replaceState({ query: resolved }, "", urlFor(resolved));
        // Say what the bare value turned out to be (unless the box was edited meanwhile).
        if ($("q").value.trim() === query.value) $("q").value = idText(found.key, query.value);
      }
      setStatus("");
      showTimeline(resolved, found.data);
    } catch (err) {
      if (seq !== state.searchSeq) return;
      setStatus("");
      if (err.status === 401) {
        needToken(err.detail, () => search(query));
        return;
      }
      hideTimeline();
      showError(err.status === 404 || err.status === 400 ? err.detail : `Error: ${err.detail}`);
    } finally {
      if (seq === state.searchSeq) $("main").removeAttribute("aria-busy");
    }
  }

  async function resolve(query) {
    if (query.key) {
      return { key: query.key, data: await api(timelinePath(query.key, query.value)) };
    }
    const tried = [];
    for (const key of candidates(query.value)) {
      try {
        return { key, data: await api(timelinePath(key, query.value)) };
      } catch (err) {
        if (err.status !== 404) throw err;
        tried.push(key);
      }
    }
    throw new ApiError(
      404,
      `no evidence mentions ${query.value} (tried it as ${tried.join(", ")})`,
    );
  }

  // ---------------------------------------------------------------- the timeline

  function hideTimeline() {
    state.data = null;
    state.seed = null;
    for (const id of ["verdict", "context", "lanes-section"]) $(id).hidden = true;
    closeDetail(false);
    $("welcome").hidden = false;
    markCurrentFinding();
  }

  function showTimeline(seed, data) {
    state.seed = seed;
    state.data = data;
    state.zoom = null;
    state.selected = null;
    state.byHash = new Map(data.events.map((event) => [event.hash, event]));
    $("welcome").hidden = true;
    closeDetail(false);
    renderVerdict(seed, data);
    renderContext(seed, data);
    $("lanes-section").hidden = false;
    renderLanes();
    document.title = `${idText(seed.key, seed.value)}: correlator`;
    markCurrentFinding();
  }

  function renderVerdict(seed, data) {
    const verdict = data.verdict || {};
    const owner = verdict.owner_layer || "none";
    const kind = owner === "none" ? "ok" : owner === "unknown" ? "unsure" : "failure";
    const box = $("verdict");
    clear(box);
    box.className = `verdict verdict-${kind}`;
    const confidence = Number(verdict.confidence ?? 0);
    append(
      box,
      h(
        "p",
        { class: "verdict-seed" },
        "Timeline of ",
        h("strong", { text: idText(seed.key, seed.value) }),
        ` · ${data.events.length} events`,
        data.truncated ? " (truncated)" : "",
      ),
      h(
        "p",
        { class: "verdict-owner" },
        owner === "none" ? "No failure found" : "Owner layer: ",
        owner === "none" ? null : h("strong", { class: "owner", text: owner }),
        h("span", {
          class: "confidence",
          text: `confidence ${Math.round(confidence * 100)}%`,
          title: "How sure the verdict is (0–100%)",
        }),
      ),
      h("p", { class: "verdict-reason", text: verdict.reason || "" }),
      data.loki ? h("p", { class: "verdict-loki", text: pulledText(data.loki) }) : null,
    );
    const first = verdict.first_failure;
    if (first && state.byHash.has(first.hash)) {
      append(
        box,
        h("button", {
          type: "button",
          class: "link-button",
          text: "Show the first failure",
          dataset: { hash: first.hash },
        }),
      );
      box.lastChild.addEventListener("click", () => selectEvent(first.hash, true));
    }
    box.hidden = false;
  }

  // What a service started with a Loki asked of it before answering (the answer's "loki").
  function pulledText(pull) {
    const hops = (pull.hops || []).length;
    const many = (n, one, more) => `${n} ${n === 1 ? one : more}`;
    let text =
      `Pulled from Loki: ${many(hops, "hop", "hops")}, ` +
      `${many(Number(pull.requests ?? 0), "query", "queries")}, ` +
      `${many(Number(pull.entries ?? 0), "entry", "entries")} (${Number(pull.new ?? 0)} new)`;
    if (pull.stopped) {
      const left = (pull.not_asked || []).length;
      const unasked = many(left, "identifier", "identifiers");
      text += `; stopped at ${pull.stopped}, ${unasked} not asked for`;
    }
    return `${text}.`;
  }

  function renderContext(seed, data) {
    const list = $("ids");
    clear(list);
    for (const key of SEARCH_ORDER) {
      const values = (data.ids && data.ids[key]) || [];
      // A busy node's dozens of instances would push the lanes off the screen: the first
      // few of a kind are shown (the seed among them), the rest behind a button.
      const isSeed = (value) => key === seed.key && value === seed.value;
      const shown =
        values.length > IDS_SHOWN + 1
          ? values.filter((value, i) => i < IDS_SHOWN || isSeed(value))
          : values;
      for (const value of shown) {
        list.appendChild(h("li", null, pivotButton(key, value, isSeed(value))));
      }
      if (shown.length === values.length) continue;
      const rest = values.filter((value) => !shown.includes(value));
      const more = h("button", {
        type: "button",
        class: "pivot more",
        text: `${rest.length} more ${key}`,
        "aria-label": `Show ${rest.length} more ${key} values`,
      });
      const item = h("li", null, more);
      more.addEventListener("click", () => {
        item.replaceWith(...rest.map((value) => h("li", null, pivotButton(key, value, false))));
      });
      list.appendChild(item);
    }
    const meta = $("meta");
    clear(meta);
    const offsets = Object.entries(data.clock_offsets || {});
    append(
      meta,
      h(
        "p",
        { class: "offsets" },
        h("span", { class: "meta-label", text: "Clock offsets applied: " }),
        offsets.length
          ? offsets.map(([source, o], i) => [
              i ? "; " : "",
              h("code", { text: source }),
              ` ${o.offset_s >= 0 ? "+" : ""}${Number(o.offset_s).toFixed(3)} s`,
              ` (${o.pairs} matched request pair${o.pairs === 1 ? "" : "s"}${
                o.consistent ? "" : ", inconsistent"
              })`,
            ])
          : "none (no source needed correcting)",
        ". Events are placed at their corrected time.",
      ),
    );
    if (data.truncated) {
      append(
        meta,
        h("p", {
          class: "warning",
          text: `Truncated: only the first ${data.events.length} events are shown; narrow the search.`,
        }),
      );
    }
    const refused = (data.graph && data.graph.refused) || [];
    if (refused.length) {
      append(
        meta,
        h(
          "details",
          { class: "refused" },
          h("summary", {
            text: `${refused.length} identifier link${refused.length === 1 ? "" : "s"} not followed`,
          }),
          h(
            "ul",
            null,
            refused.map((link) =>
              h("li", {
                text: `${Object.entries(link.from || {})
                  .map(([k, v]) => idText(k, v))
                  .join(", ")} → ${link.to_key} (${link.cardinality}, ${
                  (link.to_values || []).length
                } values): ${link.reason}`,
              }),
            ),
          ),
        ),
      );
    }
    $("context").hidden = false;
  }

  function pivotButton(key, value, current) {
    const button = h("button", {
      type: "button",
      class: current ? "pivot current" : "pivot",
      text: idText(key, value),
      "aria-label": current
        ? `${idText(key, value)} (the current search)`
        : `Show the timeline of ${idText(key, value)}`,
      "aria-current": current ? "true" : null,
      dataset: { key, value },
    });
    button.addEventListener("click", () => navigate({ key, value }));
    return button;
  }

  // A piecewise-linear time scale: runs of evidence keep a linear scale; long quiet stretches
  // shrink to BREAK_W pixels (labelled with their length), so a reimage an hour before a burst
  // of failures does not squeeze the burst into a few pixels.
  function buildScale(times, left, right, domain) {
    const sorted = Array.from(new Set(times)).sort((a, b) => a - b);
    if (domain) {
      if (!sorted.length || sorted[0] > domain[0]) sorted.unshift(domain[0]);
      if (sorted[sorted.length - 1] < domain[1]) sorted.push(domain[1]);
    }
    if (!sorted.length) sorted.push(Date.now() * NS_PER_MS);
    // Shorten the longest quiet stretches first, each while it is longer than BREAK_MIN_NS and
    // BREAK_SHARE of the time still drawn linearly, up to MAX_BREAKS of them.
    let linear = sorted[sorted.length - 1] - sorted[0];
    const quiet = [];
    for (let i = 1; i < sorted.length; i++) quiet.push([sorted[i] - sorted[i - 1], i]);
    quiet.sort((a, b) => b[0] - a[0]);
    const cuts = new Set();
    for (const [gap, i] of quiet) {
      if (cuts.size >= MAX_BREAKS || gap < BREAK_MIN_NS || gap < BREAK_SHARE * linear) break;
      cuts.add(i);
      linear -= gap;
    }
    const segments = [[sorted[0], sorted[0]]];
    for (let i = 1; i < sorted.length; i++) {
      if (cuts.has(i)) segments.push([sorted[i], sorted[i]]);
      else segments[segments.length - 1][1] = sorted[i];
    }
    const breaks = segments.length - 1;
    const free = Math.max(0, right - left - breaks * BREAK_W - segments.length * SEGMENT_MIN_W);
    const total = segments.reduce((sum, [a, b]) => sum + (b - a), 0);
    const knots = [];
    const placed = [];
    let x = left;
    segments.forEach(([a, b], i) => {
      const width =
        SEGMENT_MIN_W + (total > 0 ? (free * (b - a)) / total : free / segments.length);
      const pad = Math.min(SEGMENT_PAD, width / 2);
      if (a === b) knots.push([a, x + width / 2]);
      else knots.push([a, x + pad], [b, x + width - pad]);
      placed.push({ from: a, to: b, x0: x, x1: x + width, pad });
      x += width;
      if (i < breaks) x += BREAK_W;
    });
    const at = (t) => {
      if (t <= knots[0][0]) return knots[0][1];
      for (let i = 1; i < knots.length; i++) {
        const [t1, x1] = knots[i];
        if (t <= t1) {
          const [t0, x0] = knots[i - 1];
          return t1 === t0 ? x1 : x0 + ((t - t0) / (t1 - t0)) * (x1 - x0);
        }
      }
      return knots[knots.length - 1][1];
    };
    at.invert = (px) => {
      if (px <= knots[0][1]) return knots[0][0];
      for (let i = 1; i < knots.length; i++) {
        const [t1, x1] = knots[i];
        if (px <= x1) {
          const [t0, x0] = knots[i - 1];
          return x1 === x0 ? t1 : t0 + ((px - x0) / (x1 - x0)) * (t1 - t0);
        }
      }
      return knots[knots.length - 1][0];
    };
    at.segments = placed;
    at.first = sorted[0];
    return at;
  }

  function ticksFor(segment, scale) {
    const { from, to } = segment;
    const px = scale(to) - scale(from);
    // A point, or a run too short for two labels: one tick at its start.
    if (px < TICK_MIN_PX) return [{ t: from, ms: from % 1e9 !== 0, day: false }];
    const spanMs = (to - from) / NS_PER_MS;
    const step =
      TICK_STEPS_MS.find((ms) => (px * ms) / spanMs >= TICK_MIN_PX) ||
      TICK_STEPS_MS[TICK_STEPS_MS.length - 1];
    const stepNs = step * NS_PER_MS;
    const day = step >= DAY_MS; // ticks a day or more apart are labelled with their dates
    if ((to - from) / stepNs > 60) {
      return [
        { t: from, ms: false, day },
        { t: to, ms: false, day },
      ];
    }
    const ticks = [];
    for (let t = Math.ceil(from / stepNs) * stepNs; t <= to; t += stepNs) {
      ticks.push({ t, ms: step < 1000, day });
    }
    if (!ticks.length) ticks.push({ t: from, ms: step < 1000, day });
    return ticks;
  }

  // A tick's label: its date for ticks days apart; else its time, after its date ("11-23
  // 00:00:00") when it is the first label of a day other than the one labelled before it.
  function tickText(tick, labelledDay) {
    const iso = isoOf(tick.t);
    if (tick.day) return iso.slice(5, 10);
    const time = clock(tick.t, tick.ms);
    return iso.slice(0, 10) === labelledDay ? time : `${iso.slice(5, 10)} ${time}`;
  }

  function layersOf(events) {
    const present = new Set(events.map((event) => event.layer));
    const extra = EXTRA_LAYERS.filter((layer) => present.has(layer));
    const other = Array.from(present)
      .filter((layer) => !BASE_LAYERS.includes(layer) && !EXTRA_LAYERS.includes(layer))
      .sort();
    return [...BASE_LAYERS, ...extra, ...other];
  }

  function markShape(level, r) {
    if (level === "warning") {
      return s("path", { d: `M0 ${-r - 1} L${r + 1} ${r} L${-r - 1} ${r} Z`, class: "shape" });
    }
    if (level === "error" || level === "critical") {
      const d = r + 1;
      return s("path", { d: `M0 ${-d} L${d} 0 L0 ${d} L${-d} 0 Z`, class: "shape" });
    }
    return s("circle", { r, class: "shape" });
  }

  function eventLabel(event) {
    // Log lines can be long (up to the store's 1 MiB line limit): labels keep the start.
    const message = String(event.message || "");
    const shown = message.length > 200 ? `${message.slice(0, 200)}…` : message;
    const flags = event.first_failure ? ", first failure" : event.symptom ? ", symptom" : "";
    return `${event.level || "info"} in ${event.layer}, ${clock(eventTime(event), true)} UTC, ${
      event.service || "unknown service"
    }: ${shown}${flags}`;
  }

  function renderLanes() {
    const container = $("lanes");
    const data = state.data;
    if (!data) return;
    const focusedHash =
      document.activeElement && document.activeElement.classList.contains("mark")
        ? document.activeElement.dataset.hash
        : null;
    clear(container);
    const width = Math.max(640, Math.floor(container.clientWidth || 900));
    state.lastWidth = width;
    const zoom = state.zoom;
    const events = data.events.filter((event) => {
      const t = eventTime(event);
      return !zoom || (t >= zoom[0] && t <= zoom[1]);
    });
    const layers = layersOf(data.events);
    const left = LABEL_W + 6;
    const right = width - RIGHT_PAD;
    const scale = buildScale(events.map(eventTime), left, right, zoom);
    state.scale = scale;
    $("zoom-reset").hidden = !zoom;

    // Pack marks into rows per lane so that close events stay clickable.
    const placed = new Map(layers.map((layer) => [layer, []]));
    const rowsEnd = new Map(layers.map((layer) => [layer, []]));
    const sorted = events
      .map((event) => ({ event, x: scale(eventTime(event)) }))
      .sort((a, b) => a.x - b.x);
    for (const item of sorted) {
      const ends = rowsEnd.get(item.event.layer);
      let row = ends.findIndex((end) => item.x - end >= MIN_SEP);
      if (row < 0) row = ends.length < MAX_ROWS ? ends.length : ends.length - 1;
      ends[row] = item.x;
      item.row = row;
      placed.get(item.event.layer).push(item);
    }
    let y = AXIS_H + MARKER_ROW_H;
    const lanes = layers.map((layer) => {
      const rows = Math.max(1, rowsEnd.get(layer).length);
      const height = Math.max(LANE_MIN_H, rows * ROW_H + 14);
      const lane = { layer, top: y, height, rows };
      y += height;
      return lane;
    });
    const lanesBottom = y;
    const height = lanesBottom + FOOTER_H;

    const root = s("svg", {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      class: "timeline",
      role: "group",
      "aria-label": `Evidence on one time axis, ${events.length} events in ${layers.length} lanes`,
    });
    const defs = s(
      "defs",
      null,
      s(
        "pattern",
        {
          id: "hatch",
          width: 6,
          height: 6,
          patternUnits: "userSpaceOnUse",
          patternTransform: "rotate(45)",
        },
        s("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "hatch-line" }),
      ),
    );
    root.appendChild(defs);

    // Lane backgrounds and labels.
    const lanesGroup = s("g", { class: "lanes" });
    const totals = new Map();
    for (const event of data.events) totals.set(event.layer, (totals.get(event.layer) || 0) + 1);
    const inView = (t) => !zoom || (t >= zoom[0] && t <= zoom[1]);
    for (const lane of lanes) {
      const count = placed.get(lane.layer).length;
      const total = totals.get(lane.layer) || 0;
      lanesGroup.appendChild(
        s(
          "g",
          { class: "lane", "data-layer": lane.layer, role: "presentation" },
          s("rect", {
            x: 0,
            y: lane.top,
            width,
            height: lane.height,
            class: "lane-bg",
          }),
          s("text", {
            x: 10,
            y: lane.top + lane.height / 2 - 2,
            class: "lane-name",
            text: lane.layer,
          }),
          s("text", {
            x: 10,
            y: lane.top + lane.height / 2 + 12,
            class: "lane-count",
            text:
              count === total
                ? `${count} event${count === 1 ? "" : "s"}`
                : `${count} of ${total} events`,
          }),
          count
            ? null
            : s("text", {
                x: left + 8,
                y: lane.top + lane.height / 2 + 4,
                class: "lane-empty",
                text: total ? "no evidence in this range" : "no evidence from this layer",
              }),
        ),
      );
    }
    root.appendChild(lanesGroup);

    // The brush (drag to zoom) sits under everything clickable.
    const brush = s("rect", {
      x: left,
      y: AXIS_H,
      width: right - left,
      height: lanesBottom - AXIS_H,
      class: "brush-area",
    });
    root.appendChild(brush);

    // Axis: date, ticks and grid lines per segment; shortened stretches between segments.
    const axis = s("g", { class: "axis", "aria-hidden": "true" });
    axis.appendChild(
      s("text", {
        x: 10,
        y: 12,
        class: "axis-date",
        text: `${isoOf(scale.first).slice(0, 10)} UTC`,
      }),
    );
    let labelEnd = -Infinity; // right edge of the last tick label drawn: labels never overlap
    let labelledDay = isoOf(scale.first).slice(0, 10); // the day the axis-date names
    scale.segments.forEach((segment, i) => {
      for (const tick of ticksFor(segment, scale)) {
        const tx = scale(tick.t);
        axis.appendChild(
          s("line", { x1: tx, y1: AXIS_H - 6, x2: tx, y2: lanesBottom, class: "grid" }),
        );
        const text = tickText(tick, labelledDay);
        const half = (text.length * TICK_CHAR_PX) / 2;
        // Keep the labels at the plot's edges inside the drawing.
        const x = Math.min(Math.max(tx, half + 2), width - half - 2);
        if (x - half < labelEnd + 6) continue;
        labelEnd = x + half;
        labelledDay = isoOf(tick.t).slice(0, 10);
        axis.appendChild(
          s("text", { x, y: AXIS_H - 8, class: "tick", "text-anchor": "middle", text }),
        );
      }
      const next = scale.segments[i + 1];
      if (next) {
        const x0 = segment.x1;
        const x1 = next.x0;
        const mid = (x0 + x1) / 2;
        axis.appendChild(
          s("rect", {
            x: x0 + 6,
            y: AXIS_H,
            width: x1 - x0 - 12,
            height: lanesBottom - AXIS_H,
            class: "break-bg",
          }),
        );
        for (const bx of [mid - 4, mid + 4]) {
          let d = `M${bx} ${AXIS_H}`;
          for (let yy = AXIS_H; yy < lanesBottom; yy += 8) {
            d += ` L${bx + 3} ${yy + 4} L${bx} ${yy + 8}`;
          }
          axis.appendChild(s("path", { d, class: "break-line" }));
        }
        axis.appendChild(
          s("text", {
            x: mid,
            y: lanesBottom + 14,
            class: "break-label",
            "text-anchor": "middle",
            text: `${duration((next.from - segment.to) / 1e9)} later`,
          }),
        );
      }
    });
    root.appendChild(axis);

    // Gaps (no evidence for longer than the correlator's gap threshold).
    const overlays = s("g", { class: "overlays" });
    for (const gap of data.gaps || []) {
      if (zoom && (Number(gap.to_ns) < zoom[0] || Number(gap.from_ns) > zoom[1])) continue;
      const gx0 = scale(Number(gap.from_ns));
      const gx1 = scale(Number(gap.to_ns));
      if (gx1 - gx0 < 1) continue;
      overlays.appendChild(
        s(
          "rect",
          {
            x: gx0 + MARK_R + 2,
            y: AXIS_H + MARKER_ROW_H,
            width: Math.max(2, gx1 - gx0 - 2 * MARK_R - 4),
            height: lanesBottom - AXIS_H - MARKER_ROW_H,
            class: "gap",
          },
          s("title", { text: `gap: no evidence for ${duration(Number(gap.seconds))}` }),
        ),
      );
    }
    // Reimage boundaries: the node's last record on the old instance, first on the new one.
    // Every boundary is drawn; a label only where it does not cover the one before it (a
    // busy node is reimaged dozens of times a month): the others say it on hover.
    let reimageLabelEnd = -Infinity;
    for (const reimage of data.reimages || []) {
      if (!inView(Number(reimage.first_seen_new_ns))) continue;
      const rx0 = scale(Number(reimage.last_seen_old_ns));
      const rx1 = scale(Number(reimage.first_seen_new_ns));
      const label = `reimage ${reimage.node_id}: ${reimage.from_instance} → ${reimage.to_instance}`;
      const lineX = rx1 - MARK_R - 3;
      const labelW = label.length * LABEL_CHAR_PX;
      const anchorEnd = lineX + 4 + labelW > right; // ends at its line rather than past the plot
      const labelStart = anchorEnd ? lineX - 4 - labelW : lineX + 4;
      const labelled = labelStart > reimageLabelEnd + 6;
      if (labelled) reimageLabelEnd = labelStart + labelW;
      overlays.appendChild(
        s(
          "g",
          { class: "reimage" },
          s("title", { text: label }),
          s("rect", {
            x: rx0,
            y: AXIS_H + MARKER_ROW_H,
            width: Math.max(0, lineX - rx0),
            height: lanesBottom - AXIS_H - MARKER_ROW_H,
            class: "reimage-band",
          }),
          s("line", {
            x1: lineX,
            y1: AXIS_H + 2,
            x2: lineX,
            y2: lanesBottom,
            class: "reimage-line",
          }),
          labelled
            ? s("text", {
                x: anchorEnd ? lineX - 4 : lineX + 4,
                y: AXIS_H + MARKER_ROW_H - 5,
                "text-anchor": anchorEnd ? "end" : "start",
                class: "reimage-label",
                text: label,
              })
            : null,
        ),
      );
    }
    root.appendChild(overlays);

    // Positions of every mark, then the first failure's links to the symptoms it explains.
    const laneOf = new Map(lanes.map((lane) => [lane.layer, lane]));
    const position = new Map();
    for (const [layer, items] of placed) {
      const lane = laneOf.get(layer);
      const rows = Math.max(1, rowsEnd.get(layer).length);
      const top = lane.top + (lane.height - rows * ROW_H) / 2;
      for (const item of items) {
        position.set(item.event.hash, [item.x, top + item.row * ROW_H + ROW_H / 2]);
      }
    }
    const first = events.find((event) => event.first_failure);
    if (first) {
      const [fx, fy] = position.get(first.hash);
      const links = s("g", { class: "explains", "aria-hidden": "true" });
      for (const event of events) {
        if (!event.symptom) continue;
        const [sx, sy] = position.get(event.hash);
        const cx = (fx + sx) / 2;
        const cy = Math.min(fy, sy) - 18;
        links.appendChild(s("path", { d: `M${fx} ${fy} Q${cx} ${cy} ${sx} ${sy}` }));
      }
      root.appendChild(links);
    }

    // Marks, in time order so that Tab walks the incident from its start.
    const marks = s("g", { class: "marks" });
    const ordered = events.slice().sort((a, b) => eventTime(a) - eventTime(b));
    for (const event of ordered) {
      const [mx, my] = position.get(event.hash);
      const level = LEVELS.includes(event.level) ? event.level : "info";
      const classes = ["mark", `lv-${level}`];
      if (event.first_failure) classes.push("first-failure");
      if (event.symptom) classes.push("symptom");
      if (event.hash === state.selected) classes.push("selected");
      const big = event.first_failure ? MARK_R + 2 : MARK_R;
      const mark = s(
        "g",
        {
          class: classes.join(" "),
          transform: `translate(${mx.toFixed(1)} ${my.toFixed(1)})`,
          tabindex: 0,
          role: "button",
          "aria-label": eventLabel(event),
          "data-hash": event.hash,
          "data-layer": event.layer,
        },
        s("title", { text: eventLabel(event) }),
        s("circle", { r: big + 6, class: "focus-ring" }),
        event.first_failure || event.symptom ? s("circle", { r: big + 4, class: "halo" }) : null,
        markShape(level, big),
      );
      marks.appendChild(mark);
    }
    root.appendChild(marks);
    if (first) {
      const [fx, fy] = position.get(first.hash);
      root.appendChild(
        s("text", {
          x: fx,
          y: fy - MARK_R - 10,
          class: "first-label",
          "text-anchor": fx > right - 60 ? "end" : "middle",
          "aria-hidden": "true",
          text: "first failure",
        }),
      );
    }
    container.appendChild(root);
    attachBrush(root, brush, scale, left, right);
    if (focusedHash) {
      const again = container.querySelector(`.mark[data-hash="${CSS.escape(focusedHash)}"]`);
      if (again) again.focus();
    }
  }

  function attachBrush(root, brush, scale, left, right) {
    let start = null;
    let band = null;
    const localX = (evt) => {
      const box = root.getBoundingClientRect();
      return Math.min(right, Math.max(left, evt.clientX - box.left));
    };
    brush.addEventListener("pointerdown", (evt) => {
      if (evt.button !== 0) return;
      start = localX(evt);
      band = s("rect", {
        x: start,
        y: brush.getAttribute("y"),
        width: 0,
        height: brush.getAttribute("height"),
        class: "brush-band",
      });
      root.appendChild(band);
      brush.setPointerCapture(evt.pointerId);
    });
    brush.addEventListener("pointermove", (evt) => {
      if (start === null) return;
      const x = localX(evt);
      band.setAttribute("x", Math.min(start, x));
      band.setAttribute("width", Math.abs(x - start));
    });
    const finish = (evt) => {
      if (start === null) return;
      const x = localX(evt);
      const [a, b] = [Math.min(start, x), Math.max(start, x)];
      start = null;
      band.remove();
      if (b - a < 8) return;
      const lo = scale.invert(a);
      const hi = scale.invert(b);
      if (hi > lo) {
        state.zoom = [lo, hi];
        renderLanes();
        setStatus(`Zoomed to ${clock(lo, true)}–${clock(hi, true)} UTC.`);
      }
    };
    brush.addEventListener("pointerup", finish);
    brush.addEventListener("pointercancel", () => {
      start = null;
      if (band) band.remove();
    });
  }

  function resetZoom() {
    state.zoom = null;
    renderLanes();
    setStatus("Zoom reset.");
    $("lanes").focus();
  }

  function onMarkClick(evt) {
    const mark = evt.target.closest && evt.target.closest(".mark");
    if (mark) selectEvent(mark.dataset.hash, false);
  }

  function onMarkKey(evt) {
    const mark = evt.target.closest && evt.target.closest(".mark");
    if (!mark) return;
    if (evt.key === "Enter" || evt.key === " ") {
      evt.preventDefault();
      selectEvent(mark.dataset.hash, true);
    } else if (evt.key === "ArrowRight" || evt.key === "ArrowLeft") {
      evt.preventDefault();
      const all = Array.from(document.querySelectorAll("#lanes .mark"));
      const i = all.indexOf(mark) + (evt.key === "ArrowRight" ? 1 : -1);
      if (i >= 0 && i < all.length) all[i].focus();
    }
  }

  // ---------------------------------------------------------------- the event panel

  function selectEvent(hash, moveFocus) {
    const event = state.byHash.get(hash);
    if (!event) return;
    state.selected = hash;
    for (const mark of document.querySelectorAll("#lanes .mark")) {
      mark.classList.toggle("selected", mark.dataset.hash === hash);
    }
    renderDetail(event);
    if (moveFocus) $("detail-title").focus();
  }

  function closeDetail(returnFocus) {
    const hash = state.selected;
    $("detail").hidden = true;
    state.selected = null;
    for (const mark of document.querySelectorAll("#lanes .mark.selected")) {
      mark.classList.remove("selected");
    }
    if (returnFocus && hash) {
      const mark = document.querySelector(`#lanes .mark[data-hash="${CSS.escape(hash)}"]`);
      if (mark) mark.focus();
    }
  }

  function renderDetail(event) {
    const body = $("detail-body");
    clear(body);
    const level = LEVELS.includes(event.level) ? event.level : "info";
    const flags = [];
    if (event.first_failure) flags.push(h("span", { class: "flag flag-first", text: "first failure" }));
    if (event.symptom) flags.push(h("span", { class: "flag flag-symptom", text: "symptom" }));
    append(
      body,
      h(
        "p",
        { class: "detail-summary" },
        h("span", { class: `badge lv-${level}`, text: event.level || "info" }),
        ` ${event.layer} · `,
        h("span", { class: "service", text: event.service || "unknown service" }),
        flags,
      ),
      h("p", { class: "detail-message", text: event.message || "" }),
    );

    const ids = SEARCH_ORDER.filter((key) => event[key]);
    append(body, h("h3", { text: "Identifiers" }));
    append(
      body,
      ids.length
        ? h(
            "ul",
            { class: "detail-ids" },
            ids.map((key) => h("li", null, pivotButton(key, event[key], false))),
          )
        : h("p", { class: "hint", text: "This record carries no identifier." }),
    );

    append(
      body,
      h("h3", { text: "Raw evidence" }),
      h("pre", { class: "raw", tabindex: 0, "aria-label": "Raw evidence line", text: rawText(event.raw) }),
    );

    const rows = [
      ["Logged at", event.ts],
      event.corrected_ts_ns !== undefined
        ? [
            "Corrected to",
            `${isoOf(Number(event.corrected_ts_ns))} (${duration(
              (Number(event.corrected_ts_ns) - Number(event.ts_ns)) / 1e9,
            )} clock offset)`,
          ]
        : null,
      ["Source", event.source],
      ["Origin", event.origin],
      event.http_method || event.http_status !== undefined
        ? [
            "HTTP",
            [event.http_method, event.http_path, event.http_status].filter((v) => v !== undefined).join(" "),
          ]
        : null,
      event.duration_s !== undefined ? ["Duration", duration(Number(event.duration_s))] : null,
      event.owner_hint ? ["Owner hint", event.owner_hint] : null,
      event.error_type ? ["Error type", event.error_type] : null,
      event.entity_kind
        ? [
            "Lifecycle",
            `${event.entity_kind} ${event.entity_id || ""}: ${event.state_from || "∅"} → ${
              event.state_to || "∅"
            }`,
          ]
        : null,
      event.trace_id ? ["Trace", event.trace_id] : null,
      event.span_id ? ["Span", event.span_id] : null,
      ["Hash", event.hash],
    ].filter(Boolean);
    append(
      body,
      h(
        "dl",
        { class: "fields" },
        rows.map(([name, value]) => [h("dt", { text: name }), h("dd", { text: value ?? "" })]),
      ),
    );
    if (event.attrs && Object.keys(event.attrs).length) {
      append(
        body,
        h("h3", { text: "Attributes" }),
        h("pre", { class: "attrs", text: JSON.stringify(event.attrs, null, 2) }),
      );
    }
    $("detail-title").textContent = `Event at ${clock(eventTime(event), true)} UTC`;
    $("detail").hidden = false;
  }

  function rawText(raw) {
    if (typeof raw !== "string") return JSON.stringify(raw, null, 2);
    // A JSON line is easier to read indented; anything else is shown exactly as logged.
    if (raw.startsWith("{")) {
      try {
        return JSON.stringify(JSON.parse(raw), null, 2);
      } catch (err) {
        return raw;
      }
    }
    return raw;
  }

  // ---------------------------------------------------------------- findings

  async function loadFindings() {
    const status = $("findings-status");
    status.textContent = "Loading findings…";
    try {
      const data = await api("/v1/findings");
      renderFindings(data.findings || []);
      status.textContent = data.findings && data.findings.length ? "" : "No open findings.";
      if (data.truncated) {
        // The store holds more lifecycle events than findings read: the newest are missing.
        const cut =
          "Only the oldest lifecycle events were read: findings about the newest may be missing.";
        status.textContent = status.textContent ? `${status.textContent} ${cut}` : cut;
      }
    } catch (err) {
      if (err.status === 401) {
        status.textContent = "Findings need a token.";
        needToken(err.detail, loadFindings);
        return;
      }
      status.textContent = `Findings could not be loaded: ${err.detail}`;
    }
  }

  function findingQuery(finding) {
    const ids = finding.ids || {};
    for (const key of SEARCH_ORDER) {
      if (typeof ids[key] === "string" && ids[key]) return { key, value: ids[key] };
    }
    return null;
  }

  function renderFindings(findings) {
    const list = $("findings");
    clear(list);
    for (const finding of findings) {
      const query = findingQuery(finding);
      const severity = ["critical", "warning", "info"].includes(finding.severity)
        ? finding.severity
        : "info";
      const item = h(
        "li",
        { class: `finding sev-${severity}` },
        h(
          "p",
          { class: "finding-head" },
          h("span", { class: `badge sev-${severity}`, text: finding.severity || "finding" }),
          " ",
          h("span", { class: "finding-kind", text: `${finding.kind || ""} · ${finding.rule || ""}` }),
        ),
        h("p", { class: "finding-summary", text: finding.summary || "" }),
        h("p", {
          class: "finding-age",
          text: `${finding.entity_kind || ""} ${finding.entity_id || ""}, for ${duration(
            Number(finding.age_s || 0),
          )}`,
        }),
      );
      if (query) {
        const link = h("a", {
          href: urlFor(query),
          class: "finding-link",
          text: `Timeline of ${idText(query.key, query.value)}`,
          dataset: { key: query.key, value: query.value },
        });
        link.addEventListener("click", (evt) => {
          if (evt.button !== 0 || evt.metaKey || evt.ctrlKey || evt.shiftKey || evt.altKey) return;
          evt.preventDefault();
          navigate(query);
        });
        append(item, h("p", null, link));
      }
      list.appendChild(item);
    }
    markCurrentFinding();
  }

  function markCurrentFinding() {
    for (const link of document.querySelectorAll("#findings .finding-link")) {
      const current =
        !!state.seed &&
        link.dataset.key === state.seed.key &&
        link.dataset.value === state.seed.value;
      if (current) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }

  // ---------------------------------------------------------------- wiring

  function onSubmit(evt) {
    evt.preventDefault();
    const query = parseQuery($("q").value);
    if (!query) {
      showError("Type an identifier: a bare value such as a-7f3c, or KEY=VALUE.");
      return;
    }
    navigate(query);
  }

  function onPopState() {
    const query = queryFromUrl();
    if (!query) {
      state.searchSeq++;
      $("q").value = "";
      showError("");
      hideTimeline();
      return;
    }
    $("q").value = query.key ? idText(query.key, query.value) : query.value;
    if (!sameQuery(query, state.seed)) search(query);
  }

  function onResize() {
    if (!state.data) return;
    const width = Math.floor($("lanes").clientWidth);
    if (Math.abs(width - state.lastWidth) > 4) renderLanes();
  }

  function start() {
    $("search").addEventListener("submit", onSubmit);
    $("auth").addEventListener("submit", onTokenSubmit);
    $("forget-token").addEventListener("click", forgetToken);
    $("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
    $("detail-close").addEventListener("click", () => closeDetail(true));
    $("detail").addEventListener("keydown", (evt) => {
      if (evt.key === "Escape") closeDetail(true);
    });
    $("findings-refresh").addEventListener("click", loadFindings);
    $("zoom-reset").addEventListener("click", resetZoom);
    $("lanes").addEventListener("click", onMarkClick);
    $("lanes").addEventListener("keydown", onMarkKey);
    window.addEventListener("popstate", onPopState);
    if (window.ResizeObserver) new ResizeObserver(onResize).observe($("lanes"));
    else window.addEventListener("resize", onResize);
    $("q").focus();
    loadFindings();
    const query = queryFromUrl();
    if (query) {
      $("q").value = query.key ? idText(query.key, query.value) : query.value;
      search(query);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
