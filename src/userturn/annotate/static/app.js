// Blinded annotation page. Plain JS, no dependencies, no external requests.
// Every piece of packet text is inserted with textContent, never innerHTML: model outputs
// contain <tags>, template tokens and {{ }} that must show literally.
"use strict";

const DESCRIPTIONS = {
  previous_turn_restate: "repeats the earlier user prompt, verbatim or nearly",
  assistant_turn_restate: "copies, paraphrases or continues the assistant's answer",
  meta_planning: "assistant-style reasoning or planning under the user role",
  new_task_prompt: "launches an unrelated new task or question",
  malformed_artifact: "template or role tokens, broken markup, garbage",
  degenerate_short: "empty, or too short to carry content",
  plausible_followup: "the genuine case: grounded in the conversation",
  other: "anything else",
};
const NAME_KEY = "userturn-annotator";
const $ = (id) => document.getElementById(id);

const state = {
  annotator: null, ids: [], labels: [], saved: new Map(), pos: 0,
  genuine: null, label: null, busy: false,
};

async function api(method, url, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(url, opts);
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const detail = Array.isArray(data.detail) ? data.detail.map((d) => d.msg).join("; ")
      : (data.detail || res.statusText);
    throw new Error(`${res.status}: ${detail}`);
  }
  return data;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function say(text, kind) {
  const m = $("message");
  m.textContent = text;
  m.className = "message" + (kind ? " " + kind : "");
}

function buildLabels() {
  const box = $("labels");
  box.replaceChildren();
  state.labels.forEach((label, i) => {
    const b = el("button");
    b.type = "button";
    b.dataset.label = label;
    b.append(el("kbd", null, String(i + 1)), el("span", "name", label.replaceAll("_", " ")),
      el("span", "desc", DESCRIPTIONS[label] || ""));
    b.addEventListener("click", () => setLabel(label));
    box.append(b);
  });
}

function renderMessage(m) {
  const known = ["system", "user", "assistant"].includes(m.role);
  const box = el("div", "msg " + (known ? m.role : "assistant"));
  box.append(el("span", "role", m.role), document.createTextNode(m.content));
  return box;
}

async function show(pos) {
  state.pos = (pos + state.ids.length) % state.ids.length;
  const ex = await api("GET", `/api/examples/${encodeURIComponent(state.ids[state.pos])}`);
  $("context").replaceChildren(...ex.messages.map(renderMessage));
  const cand = $("candidate");
  cand.classList.toggle("empty", ex.user_turn.trim() === "");
  cand.textContent = ex.user_turn.trim() === "" ? "(empty user turn)" : ex.user_turn;
  const prev = state.saved.get(ex.id);
  state.genuine = prev ? prev.genuine : null;
  state.label = prev ? prev.label : null;
  $("note").value = prev ? prev.note : "";
  $("position").textContent = `Example ${state.pos + 1} of ${state.ids.length}`;
  say("");
  paint();
  window.scrollTo(0, 0);
}

function paint() {
  $("yes").classList.toggle("on", state.genuine === true);
  $("no").classList.toggle("on", state.genuine === false);
  for (const b of $("labels").children) b.classList.toggle("on", b.dataset.label === state.label);
  const done = state.saved.has(state.ids[state.pos]);
  $("chip").textContent = done ? "labelled \u2713" : "not labelled yet";
  $("chip").classList.toggle("done", done);
  const n = state.saved.size;
  $("progress-text").textContent = `${n} / ${state.ids.length} labelled`;
  $("progress-fill").style.width = `${(100 * n) / Math.max(1, state.ids.length)}%`;
}

function setGenuine(value) { state.genuine = value; paint(); }
function setLabel(label) { state.label = label; paint(); }

function nextUnlabelled(from) {
  for (let k = 1; k <= state.ids.length; k++) {
    const p = (from + k) % state.ids.length;
    if (!state.saved.has(state.ids[p])) return p;
  }
  return -1;
}

async function submit() {
  if (state.busy) return;
  if (state.genuine === null || state.label === null) {
    say("Pick genuine (y/n) and a label (1\u20138) first.", "err");
    return;
  }
  state.busy = true;
  const id = state.ids[state.pos];
  const body = { annotator: state.annotator, genuine: state.genuine, label: state.label,
    note: $("note").value };
  try {
    const saved = await api("PUT", `/api/annotations/${encodeURIComponent(id)}`, body);
    state.saved.set(id, { genuine: saved.genuine, label: saved.label, note: saved.note });
    const next = nextUnlabelled(state.pos);
    if (next < 0) {
      paint();
      say(`All ${state.ids.length} examples labelled. Thank you! You can still go back and revise.`, "ok");
    } else {
      await show(next);
      const odd = saved.genuine !== (saved.label === "plausible_followup");
      say(odd ? "Saved (note: genuine and label disagree on the previous one)." : "Saved.",
        odd ? "warn" : "ok");
    }
  } catch (err) {
    say(`Not saved: ${err.message}`, "err");
  } finally {
    state.busy = false;
  }
}

function onKey(ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || $("work").hidden) return;
  const typing = ev.target instanceof HTMLInputElement;
  if (typing) {
    if (ev.key === "Enter") { ev.preventDefault(); submit(); }
    if (ev.key === "Escape") ev.target.blur();
    return;
  }
  const k = ev.key;
  if (k === "y" || k === "Y") setGenuine(true);
  else if (k === "n" || k === "N") setGenuine(false);
  else if (/^[1-8]$/.test(k) && Number(k) <= state.labels.length) setLabel(state.labels[Number(k) - 1]);
  else if (k === "Enter") submit();
  else if (k === "ArrowLeft") show(state.pos - 1);
  else if (k === "ArrowRight") show(state.pos + 1);
  else return;
  ev.preventDefault();
}

async function start(name) {
  const got = await api("GET", `/api/annotations?annotator=${encodeURIComponent(name)}`);
  state.annotator = got.annotator;
  localStorage.setItem(NAME_KEY, got.annotator);
  state.saved = new Map(got.annotations.map((a) => [a.id, a]));
  $("who-name").textContent = got.annotator;
  $("login").hidden = true;
  $("work").hidden = $("who").hidden = $("progress").hidden = false;
  const first = nextUnlabelled(-1);
  await show(first < 0 ? 0 : first);
  if (first < 0) say("Everything is labelled; use \u2190/\u2192 to review.", "ok");
}

function showLogin(error) {
  $("work").hidden = $("who").hidden = $("progress").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = error || "";
  $("name").focus();
}

async function main() {
  const info = await api("GET", "/api/packet");
  state.ids = info.ids;
  state.labels = info.labels;
  buildLabels();
  $("yes").addEventListener("click", () => setGenuine(true));
  $("no").addEventListener("click", () => setGenuine(false));
  $("submit").addEventListener("click", submit);
  $("back").addEventListener("click", () => show(state.pos - 1));
  $("skip").addEventListener("click", () => show(state.pos + 1));
  $("switch").addEventListener("click", () => { localStorage.removeItem(NAME_KEY); showLogin(); });
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    start($("name").value.trim()).catch(() => showLogin(
      "Use letters, digits, spaces, dots, dashes or apostrophes (at most 64)."));
  });
  document.addEventListener("keydown", onKey);
  const name = localStorage.getItem(NAME_KEY);
  if (name) await start(name).catch(() => showLogin());
  else showLogin();
}

main().catch((err) => say(`Could not load the packet: ${err.message}`, "err"));
