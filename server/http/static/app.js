// The lookup page: one search box over the HTTP API of rmq-query serve.
//
// Plain JavaScript with no library and no build step, so the page is the files in the package and
// works offline. Everything shown that comes from the store (topics, keys, bodies, properties) is
// put in the page as text (textContent), never as HTML: a message body is anyone's input.
// Every request is one bounded API call: 50 messages a page, 200 names a page, one histogram.
"use strict";

const PAGE = 50;
const NAMES = 200;
const FAR_FUTURE = 9999999999999;
const $ = (id) => document.getElementById(id);

// -- helpers -------------------------------------------------------------------------------------

// The server's token a POST must send (GET /api/csrf-token; pages of other sites cannot read it).
let csrf = null;

async function api(path, post) {
  // {status, body}; a network failure is status 0 with a message, never an exception to the caller.
  // ``post``: an object sent as the JSON body of a POST (the server takes no other POST), with the
  // server's token; a token refused (the server restarted since it was fetched) is fetched again once.
  if (post === undefined) return request(path);
  for (let attempt = 0; ; attempt++) {
    if (csrf === null) {
      const t = await request("/api/csrf-token");
      if (t.status !== 200) return t;
      csrf = t.body;
    }
    const answer = await request(path, post, csrf);
    if (answer.status !== 403 || (answer.body || {}).error !== "csrf" || attempt > 0) return answer;
    csrf = null;
  }
}

async function request(path, post, token) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 30000);
  const init = { signal: abort.signal, headers: { Accept: "application/json" } };
  if (post !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.headers[token.header] = token.csrfToken;
    init.body = JSON.stringify(post);
  }
  try {
    const response = await fetch(path, init);
    let body = null;
    try { body = await response.json(); } catch (e) { body = { message: response.statusText }; }
    return { status: response.status, body: body };
  } catch (e) {
    return { status: 0, body: { message: "the server did not answer: " + e } };
  } finally {
    clearTimeout(timer);
  }
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? wrapCell(c) : el("td", c));
  return tr;
}

function wrapCell(node) {
  if (node.tagName === "TD" || node.tagName === "TH") return node;
  const td = document.createElement("td");
  td.appendChild(node);
  return td;
}

// "1 message", "2 messages": ``noun`` is the singular.
function plural(n, noun) { return n + " " + (n === 1 ? noun : noun + "s"); }

function pad(n, w) { return String(n).padStart(w || 2, "0"); }

function utc(ms) {
  if (ms === null || ms === undefined || ms <= 0) return "";
  const d = new Date(ms);
  if (isNaN(d.getTime())) return String(ms);
  return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
    pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + "." +
    pad(d.getUTCMilliseconds(), 3);
}

function enc(s) { return encodeURIComponent(s); }

function setStatus(id, text, isError) {
  const box = $(id);
  box.textContent = text || "";
  box.className = isError ? "error" : "";
}

// -- views ---------------------------------------------------------------------------------------

// The page's address says what it shows, so it can be bookmarked and shared: "#q=TEXT" (or "?q=TEXT")
// a search, "#topics" and "#groups" (or "?tab=topics") a tab. Kept up to date with replaceState.
const VIEWS = ["search", "topics", "groups"];

function setAddress(hash) {
  history.replaceState(null, "", location.pathname + hash);
}

function show(view) {
  if (view !== "search") setAddress("#" + view);
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + view;
  if (view === "topics" && !topicsLoaded) loadTopics(false);
  if (view === "groups" && !groupsLoaded) loadGroups(false);
}

// -- search --------------------------------------------------------------------------------------

// The listing now shown: how to fetch a page of it, and the cursors of the pages seen so far.
let listing = null;

function parseTime(text) {
  // epoch milliseconds, or ISO-8601 (a date, or a date and time; UTC unless a zone is given)
  if (/^\d{10,16}$/.test(text)) return Number(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text)) return null;
  const zoned = /(Z|[+-]\d{2}:?\d{2})$/.test(text) ? text : (text.length === 10 ? text + "T00:00:00Z" : text + "Z");
  const ms = Date.parse(zoned);
  return isNaN(ms) ? null : ms;
}

function parseRange(token) {
  // "from..to" (either side may be left out) -> [begin, end], or null when the token is not a range
  const at = token.indexOf("..");
  if (at < 0) return null;
  const left = token.slice(0, at), right = token.slice(at + 2);
  const begin = left === "" ? 0 : parseTime(left);
  let end = right === "" ? FAR_FUTURE : parseTime(right);
  if (begin === null || end === null) return null;
  if (right.length === 10) end += 86400000 - 1; // a date as the end means the whole day
  return [begin, end];
}

async function runSearch(text) {
  setAddress(text.trim() ? "#q=" + enc(text) : "#search");
  const tokens = text.trim().split(/\s+/).filter((t) => t !== "");
  clearResults();
  if (tokens.length === 0) { setStatus("status", "Type a message id, a unique key, or a topic and a key."); return; }
  if (tokens.length === 1) {
    const topic = await api("/api/topics/" + enc(tokens[0]));
    if (topic.status === 200) { browseTopic(tokens[0], 0, FAR_FUTURE); return; }
    if (topic.status === 401 || topic.status === 403) return failed(topic);
    return lookupId(tokens[0]);
  }
  const topicName = tokens[0];
  const topic = await api("/api/topics/" + enc(topicName));
  if (topic.status === 404) {
    return nothing("There is no topic " + JSON.stringify(topicName) + " in this store. Search a topic and a key " +
      "as: <topic> <key>; a message id or unique key alone.");
  }
  if (topic.status !== 200) return failed(topic);
  let range = null;
  const rest = [];
  for (const t of tokens.slice(1)) {
    const r = parseRange(t);
    if (r) range = r; else rest.push(t);
  }
  if (rest.length > 1) {
    setStatus("status", "One key at a time: " + JSON.stringify(rest.join(" ")) + " is more than one word.", true);
    return;
  }
  if (rest.length === 0) {
    if (!range) { setStatus("status", "Not a time range: from..to", true); return; }
    browseTopic(topicName, range[0], range[1]);
    return;
  }
  const key = rest[0];
  let path = "/api/topics/" + enc(topicName) + "/messages?key=" + enc(key);
  if (range) path += "&begin=" + range[0] + "&end=" + range[1];
  startListing({
    what: "of " + topicName + " with key " + key + (range ? " stored " + utc(range[0]) + " .. " + utc(range[1]) : ""),
    path: path,
    paged: false,
    empty: "No message of topic " + topicName + " has the key or unique key " + JSON.stringify(key) +
      (range ? " in that time range." : "."),
  });
}

function browseTopic(topic, begin, end) {
  const whole = begin === 0 && end === FAR_FUTURE;
  startListing({
    what: "of " + topic + (whole ? "" : " stored " + utc(begin) + " .. " + utc(end)),
    path: "/api/topics/" + enc(topic) + "/messages?begin=" + begin + "&end=" + end + "&limit=" + PAGE,
    paged: true,
    empty: whole ? "Topic " + topic + " holds no message." : "No message of topic " + topic + " was stored in that time range.",
  });
}

function browseDlq(group) {
  show("search");
  clearResults();
  startListing({
    noun: "dead letter",
    what: "of consumer group " + group,
    path: "/api/groups/" + enc(group) + "/dlq?limit=" + PAGE,
    paged: true,
    empty: "Consumer group " + group + " has no dead-letter message.",
  });
}

async function lookupId(id) {
  const answer = await api("/api/messages/" + enc(id));
  if (answer.status === 404) {
    return nothing("No message has the offset id or unique key " + JSON.stringify(id) + ". To search by a " +
      "message key, put its topic first: <topic> <key>.");
  }
  if (answer.status !== 200) return failed(answer);
  const copies = answer.body.messages;
  listing = { what: "", path: null, paged: false, cursors: [""], page: 0 };
  const how = answer.body.matchedAs === "offsetMsgId" ? "offset message id" : "unique key";
  showRows(copies, "Found by " + how + ": " + copies.length + (copies.length === 1 ? " record" : " records (every copy)"), null);
  const chosen = copies.find((m) => m.offsetMsgId === id) || copies[0];
  openMessage(chosen);
}

function startListing(spec) {
  listing = Object.assign({ cursors: [""], page: 0 }, spec);
  loadPage();
}

async function loadPage() {
  const spec = listing;
  const cursor = spec.cursors[spec.page];
  const path = spec.path + (cursor ? "&cursor=" + enc(cursor) : "");
  setStatus("status", "Searching…");
  const answer = await api(path);
  if (spec !== listing) return; // a newer search started meanwhile
  setStatus("status", "");
  if (answer.status === 404) return nothing(answer.body.message);
  if (answer.status !== 200) return failed(answer);
  const messages = answer.body.messages;
  if (messages.length === 0 && spec.page === 0) return nothing(spec.empty);
  const next = answer.body.nextCursor;
  if (next) spec.cursors[spec.page + 1] = next; else spec.cursors.length = spec.page + 1;
  let summary = plural(messages.length, spec.noun || "message") + " " + spec.what;
  if (answer.body.truncated) summary += " (the index walk stopped at its budget: there may be more; narrow the time range)";
  showRows(messages, summary, spec.path);
}

function showRows(messages, summary, exportPath) {
  $("nothing").hidden = true;
  $("results").hidden = false;
  $("result-summary").textContent = summary;
  const paged = listing && listing.paged;
  $("prev-page").hidden = !paged;
  $("next-page").hidden = !paged;
  $("page-number").hidden = !paged;
  if (paged) {
    $("prev-page").disabled = listing.page === 0;
    $("next-page").disabled = listing.cursors.length <= listing.page + 1;
    $("page-number").textContent = "page " + (listing.page + 1);
  }
  for (const [id, fmt] of [["export-csv", "csv"], ["export-jsonl", "jsonl"]]) {
    const link = $(id);
    link.hidden = !exportPath;
    if (exportPath) {
      const cursor = listing.cursors[listing.page];
      link.href = exportPath + (cursor ? "&cursor=" + enc(cursor) : "") + "&format=" + fmt;
    }
  }
  const body = $("result-table").tBodies[0];
  body.replaceChildren();
  for (const m of messages) {
    const tr = row([utc(m.storeTimestamp), m.topic, m.queueId, m.queueOffset, m.tags || "",
      (m.keys || []).join(" "), m.uniqueKey || "", m.bodyLength]);
    tr.className = "clickable";
    tr.dataset.offsetMsgId = m.offsetMsgId;
    tr.addEventListener("click", () => {
      for (const other of body.rows) other.classList.remove("selected");
      tr.classList.add("selected");
      openMessage(m);
    });
    body.appendChild(tr);
  }
}

function clearResults() {
  $("nothing").hidden = true;
  $("denied").hidden = true;
  $("results").hidden = true;
  $("message").hidden = true;
  setStatus("status", "");
}

function nothing(detail) {
  $("results").hidden = true;
  $("message").hidden = true;
  $("nothing").hidden = false;
  $("nothing-detail").textContent = detail || "";
}

function failed(answer) {
  const b = answer.body || {};
  if (answer.status === 401 || answer.status === 403) {
    // access control (serve --acl): said as such, not as a failed search or as nothing found
    $("results").hidden = true;
    $("message").hidden = true;
    $("nothing").hidden = true;
    $("denied").hidden = false;
    $("denied-detail").textContent = answer.status === 401 ?
      "This server asks for an account (access key and secret key): reload the page to sign in. " + (b.message || "") :
      "Your account may not read this: " + (b.message || "");
    return;
  }
  const what = answer.status === 400 ? "That search is not understood: " : answer.status === 503 ?
    "The store could not be read: " : "The search failed (" + answer.status + "): ";
  setStatus("status", what + (b.message || ""), true);
}

// -- one message ---------------------------------------------------------------------------------

let shown = null; // the message in the message view

function openMessage(m) {
  shown = m;
  $("message").hidden = false;
  $("message-title").textContent = m.offsetMsgId;
  const fields = [
    ["Topic", m.topic], ["Queue", m.queueId], ["Queue offset", m.queueOffset],
    ["Offset message id", m.offsetMsgId], ["Unique key (msgId)", m.uniqueKey || ""],
    ["Tags", m.tags || ""], ["Keys", (m.keys || []).join(" ")],
    ["Stored (UTC)", utc(m.storeTimestamp) + "  (" + m.storeTimestamp + ")"],
    ["Born (UTC)", utc(m.bornTimestamp) + "  (" + m.bornTimestamp + ")"],
    ["Born host", m.bornHost], ["Store host", m.storeHost], ["CommitLog offset", m.commitLogOffset],
    ["Record size", m.storeSize], ["Body size", m.bodyLength], ["Reconsume times", m.reconsumeTimes],
    ["Transaction", m.transactionType], ["Flag / sysFlag", m.flag + " / " + m.sysFlag],
  ];
  fill($("message-fields"), fields);
  fill($("message-properties"), Object.entries(m.properties || {}).sort());
  $("body-download").href = "/api/messages/" + enc(m.offsetMsgId) + "/body";
  $("resend-topic").value = "";
  $("resend-topic").placeholder = m.properties && m.properties.RETRY_TOPIC && /^%(RETRY|DLQ)%/.test(m.topic) ?
    m.properties.RETRY_TOPIC : m.topic;
  setStatus("resend-status", "");
  renderBody();
  loadTrace(m);
}

function fill(table, pairs) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const [k, v] of pairs) {
    const tr = row([el("th", k), String(v)]);
    body.appendChild(tr);
  }
}

function bodyBytes(m) {
  const raw = atob(m.bodyBase64 || "");
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function hexDump(bytes) {
  const lines = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const chunk = bytes.slice(at, at + 16);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(at.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + "  " + ascii);
  }
  return lines.join("\n");
}

function renderBody() {
  const m = shown;
  if (!m) return;
  const bytes = bodyBytes(m);
  const view = $("body-view").value;
  const notes = [];
  if (m.bodyCompressed) notes.push("The body is compressed with a codec this server lacks; shown as stored.");
  if (m.bodyTruncated) notes.push("The first " + bytes.length + " of " + m.bodyLength + " bytes are shown; download the body for all of it.");
  if (m.bodyLength === 0) notes.push("The body is empty.");
  let text;
  if (view === "hex") {
    text = hexDump(bytes);
  } else {
    let decoded;
    try {
      decoded = new TextDecoder($("body-charset").value).decode(bytes);
    } catch (e) {
      decoded = new TextDecoder("utf-8").decode(bytes);
      notes.push("This browser cannot decode " + $("body-charset").value + "; shown as UTF-8.");
    }
    text = decoded;
    if (view === "json") {
      try {
        text = JSON.stringify(JSON.parse(decoded), null, 2);
      } catch (e) {
        notes.push("The body is not JSON" + (m.bodyTruncated ? " (or is cut where the preview ends)" : "") + ": shown as text.");
      }
    }
  }
  $("body-note").textContent = notes.join(" ");
  $("body").textContent = text;
}

async function loadTrace(m) {
  const box = $("trace");
  box.replaceChildren(el("p", "Looking for a trace…", "note"));
  const id = m.uniqueKey || m.offsetMsgId;
  const answer = await api("/api/messages/" + enc(id) + "/trace");
  if (shown !== m) return;
  box.replaceChildren();
  if (answer.status === 404) {
    box.appendChild(el("p", "No trace of this message (traces are written when the client enables message trace).", "note none"));
    return;
  }
  if (answer.status !== 200) { box.appendChild(el("p", (answer.body && answer.body.message) || "trace failed", "error")); return; }
  const events = answer.body.events;
  const first = events.reduce((t, e) => (e.timestamp !== undefined && (t === null || e.timestamp < t) ? e.timestamp : t), null);
  const list = el("ol", null, "timeline");
  for (const e of events) {
    const item = el("li", null, "event " + (e.success === false ? "failed" : "ok"));
    item.dataset.type = e.type;
    const when = e.timestamp !== undefined ? utc(e.timestamp) + (first !== null ? "  +" + (e.timestamp - first) + " ms" : "") : "";
    item.appendChild(el("span", e.type, "type"));
    item.appendChild(el("span", when, "when"));
    const parts = [];
    if (e.groupName) parts.push((e.type === "Pub" || e.type === "EndTransaction" ? "producer " : "consumer ") + e.groupName);
    if (e.clientHost) parts.push("from " + e.clientHost);
    if (e.storeHost) parts.push("broker " + e.storeHost);
    if (e.costTime !== undefined) parts.push("took " + e.costTime + " ms");
    if (e.retryTimes !== undefined) parts.push("retry " + e.retryTimes);
    if (e.success !== undefined) parts.push(e.success ? "succeeded" : "FAILED");
    if (e.transactionState) parts.push("transaction " + e.transactionState);
    if (e.type === "unparsed") parts.push((e.fields || []).join(" | "));
    item.appendChild(el("span", parts.join(", "), "what"));
    list.appendChild(item);
  }
  box.appendChild(list);
}

// -- topics and the chart ------------------------------------------------------------------------

let topicsLoaded = false;
let topicsAfter = null;

async function loadTopics(more) {
  topicsLoaded = true;
  setStatus("topics-status", "Loading topics…");
  const answer = await api("/api/topics?limit=" + NAMES + (more && topicsAfter ? "&after=" + enc(topicsAfter) : ""));
  if (answer.status !== 200) { topicsLoaded = false; return setStatus("topics-status", answer.body.message, true); }
  setStatus("topics-status", "");
  const body = $("topic-table").tBodies[0];
  if (!more) body.replaceChildren();
  for (const t of answer.body.topics) {
    // the queues that hold messages, a few of them (a topic may have a thousand queues)
    const held = t.queues.filter((q) => q.maxOffset > q.minOffset);
    let offsets = held.slice(0, 6).map((q) => q.queueId + ": " + q.minOffset + ".." + q.maxOffset).join(", ");
    if (held.length > 6) offsets += ", … (" + (held.length - 6) + " more)";
    if (!held.length) offsets = "empty";
    const tr = row([t.topic, t.queues.length, t.messages, offsets, utc(t.lastStoreTimestamp)]);
    tr.className = "clickable" + (t.system ? " system" : "");
    tr.dataset.topic = t.topic;
    tr.addEventListener("click", () => loadChart(t.topic));
    body.appendChild(tr);
  }
  topicsAfter = answer.body.nextAfter;
  $("topics-more").hidden = !topicsAfter;
  showSystemTopics();
  if (!more) {
    // chart the busiest user topic first (system topics hold little an operator looks for)
    const candidates = answer.body.topics.filter((t) => t.messages > 0);
    const user = candidates.filter((t) => !t.system && !/^(RMQ_SYS_|SCHEDULE_TOPIC|%RETRY%|%DLQ%|rmq_sys_)/.test(t.topic));
    const pick = (user.length ? user : candidates).sort((a, b) => b.messages - a.messages)[0];
    if (pick) loadChart(pick.topic);
  }
}

function showSystemTopics() {
  // the broker's own topics (TBW102, BenchmarkTest's 1024 queues, the cluster's and broker's names,
  // RMQ_SYS_*, ...) crowd the list: hidden unless the switch is on, and counted when hidden
  const on = $("show-system").checked;
  let hidden = 0;
  for (const tr of $("topic-table").tBodies[0].rows) {
    tr.hidden = !on && tr.classList.contains("system");
    if (tr.hidden) hidden += 1;
  }
  $("system-hidden").textContent = hidden ? "(" + hidden + " hidden)" : "";
}

async function loadChart(topic) {
  $("chart-box").hidden = false;
  $("chart-topic").textContent = topic;
  for (const tr of $("topic-table").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.topic === topic);
  const box = $("chart");
  box.replaceChildren(el("p", "Counting…", "note"));
  box.dataset.topic = topic;
  const answer = await api("/api/topics/" + enc(topic) + "/histogram?buckets=120");
  if (box.dataset.topic !== topic) return;
  box.replaceChildren();
  if (answer.status !== 200) { box.appendChild(el("p", answer.body.message, "error")); return; }
  const h = answer.body;
  const minutes = h.bucketMillis / 60000;
  $("chart-unit").textContent = "per " + (minutes === 1 ? "minute" : minutes + " minutes");
  $("chart-range").textContent = h.counts.length ? utc(h.begin) + " .. " + utc(h.end) + " UTC, " + plural(h.total, "message") : "";
  $("chart-browse").onclick = () => { show("search"); $("q").value = topic; runSearch(topic); };
  if (!h.counts.length) { box.appendChild(el("p", "This topic holds no message.", "note none")); return; }
  box.appendChild(barChart(h, topic));
}

function barChart(h, topic) {
  const NS = "http://www.w3.org/2000/svg";
  const width = 760, height = 180, left = 50, bottom = 20;
  const max = Math.max(1, ...h.counts);
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 " + width + " " + (height + bottom));
  svg.setAttribute("class", "chart");
  const bar = (width - left) / h.counts.length;
  const line = (x1, y1, x2, y2) => {
    const l = document.createElementNS(NS, "line");
    l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2);
    l.setAttribute("class", "axis");
    svg.appendChild(l);
  };
  const label = (x, y, text, anchor) => {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("text-anchor", anchor || "start");
    t.textContent = text;
    svg.appendChild(t);
  };
  line(left, 0, left, height);
  line(left, height, width, height);
  label(left - 4, 10, String(max), "end");
  label(left - 4, height, "0", "end");
  label(left, height + 15, utc(h.begin).slice(0, 16));
  label(width, height + 15, utc(h.end + 1).slice(0, 16), "end");
  h.counts.forEach((count, i) => {
    const r = document.createElementNS(NS, "rect");
    const tall = (count / max) * (height - 2);
    r.setAttribute("x", left + i * bar + 0.5);
    r.setAttribute("width", Math.max(1, bar - 1));
    r.setAttribute("y", height - tall);
    r.setAttribute("height", tall);
    r.setAttribute("class", "bar");
    const start = h.begin + i * h.bucketMillis;
    r.dataset.start = start;
    r.dataset.count = count;
    const tip = document.createElementNS(NS, "title");
    tip.textContent = utc(start).slice(0, 16) + " UTC: " + plural(count, "message");
    r.appendChild(tip);
    // a click lists that bucket's messages
    r.addEventListener("click", () => {
      show("search");
      $("q").value = topic + " " + start + ".." + (start + h.bucketMillis - 1);
      runSearch($("q").value);
    });
    svg.appendChild(r);
  });
  return svg;
}

// -- consumer groups -----------------------------------------------------------------------------

let groupsLoaded = false;
let groupsAfter = null;

async function loadGroups(more) {
  groupsLoaded = true;
  setStatus("groups-status", "Loading consumer groups…");
  const answer = await api("/api/groups?limit=" + NAMES + (more && groupsAfter ? "&after=" + enc(groupsAfter) : ""));
  if (answer.status !== 200) { groupsLoaded = false; return setStatus("groups-status", answer.body.message, true); }
  const body = $("group-table").tBodies[0];
  if (!more) body.replaceChildren();
  setStatus("groups-status", answer.body.groups.length || more ? "" :
    "No consumer group has committed an offset (config/consumerOffset.json holds none).");
  for (const g of answer.body.groups) {
    const dlq = el("button", "Dead letters");
    dlq.type = "button";
    dlq.addEventListener("click", (ev) => { ev.stopPropagation(); browseDlq(g.group); });
    const tr = row([g.group, g.onlineConsumers, g.diff, g.topics.map((t) => t.topic).join(", "), dlq]);
    tr.className = "clickable";
    tr.dataset.group = g.group;
    tr.addEventListener("click", () => showGroup(g));
    body.appendChild(tr);
  }
  groupsAfter = answer.body.nextAfter;
  $("groups-more").hidden = !groupsAfter;
}

function showGroup(g) {
  $("group-detail").hidden = false;
  $("group-name").textContent = g.group;
  const body = $("group-queues").tBodies[0];
  body.replaceChildren();
  for (const t of g.topics) {
    for (const q of t.queues) {
      const tr = row([t.topic, q.queueId, q.brokerOffset, q.committed ? q.consumerOffset : "none committed", q.diff]);
      if (q.diff > 0) tr.className = "lagging";
      body.appendChild(tr);
    }
  }
}

async function resend() {
  // a copy of the shown message, sent as a producer would (serve --writable; PUB on the topic)
  const m = shown;
  if (!m) return;
  const topic = $("resend-topic").value.trim();
  setStatus("resend-status", "Sending…");
  const answer = await api("/api/messages/" + enc(m.offsetMsgId) + "/resend", topic ? { topic: topic } : {});
  if (m !== shown) return;
  const b = answer.body || {};
  if (answer.status === 201) {
    setStatus("resend-status", "Sent to " + b.topic + " queue " + b.queueId + " offset " + b.queueOffset +
      ": message id " + b.uniqueKey + ", offset message id " + b.offsetMsgId);
    $("resend-status").dataset.offsetMsgId = b.offsetMsgId;
    return;
  }
  const why = answer.status === 405 ? "This server is read-only (start it with --writable to resend). " :
    answer.status === 403 ? "Not allowed: " : answer.status === 401 ? "Sign in first: " :
    "The resend failed (" + answer.status + "): ";
  setStatus("resend-status", why + (b.message || ""), true);
}

// -- wiring --------------------------------------------------------------------------------------

$("search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  runSearch($("q").value);
});
$("prev-page").addEventListener("click", () => { if (listing.page > 0) { listing.page -= 1; loadPage(); } });
$("next-page").addEventListener("click", () => {
  if (listing.cursors.length > listing.page + 1) { listing.page += 1; loadPage(); }
});
$("body-view").addEventListener("change", renderBody);
$("resend").addEventListener("click", resend);
$("body-charset").addEventListener("change", renderBody);
$("topics-more").addEventListener("click", () => loadTopics(true));
$("groups-more").addEventListener("click", () => loadGroups(true));
for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    show(tab.dataset.view);
    if (tab.dataset.view === "search") setAddress($("q").value.trim() ? "#q=" + enc($("q").value) : "#search");
  });
}
$("show-system").addEventListener("change", showSystemTopics);

function openAddress() {
  // a link's "?q=" / "?tab=" (what a chat or a ticket keeps) or "#q=" / "#topics" (what this page writes)
  const params = new URLSearchParams(location.search);
  const hash = location.hash.slice(1);
  let text = params.get("q");
  let view = params.get("tab");
  if (hash.startsWith("q=")) text = decodeURIComponent(hash.slice(2));
  else if (VIEWS.includes(hash)) view = hash;
  if (text !== null) {
    show("search");
    $("q").value = text;
    runSearch(text);
  } else if (VIEWS.includes(view)) {
    show(view);
  }
}
window.addEventListener("hashchange", openAddress);
openAddress();
document.body.dataset.ready = "true";
