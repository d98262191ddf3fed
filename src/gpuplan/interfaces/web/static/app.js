// gpuplan page: form -> POST /api/plots/recommend (inference) or /api/plots/train-plan (training)
// -> table + plotly charts. No build step, no CDN.
"use strict";

const $ = (id) => document.getElementById(id);
// Server error "field" (a scenario path or an id kind) -> the form input it is about, and the input whose
// error box shows it when that differs (epochs and samples share the tokens box).
const FIELD_INPUTS = [
  ["workload.input_tokens", "input_tokens"], ["workload.output_tokens", "output_tokens"],
  ["workload.rate_rps", "load"], ["workload.concurrency", "load"], ["sla.ttft_ms", "ttft_ms"],
  ["sla.tpot_ms", "tpot_ms"], ["sla.ttft_p99_ms", "ttft_ms"], ["sla.tpot_p99_ms", "tpot_ms"],
  ["prices.max_usd_per_hour", "budget"], ["hardware.max_gpus", "max_gpus"],
  ["hardware.gpus", "gpus"], ["GPU", "gpus"], ["precision.allowed", "dtypes"], ["dtype", "dtypes"],
  ["config_json", "config_json"], ["model", "model"], ["confidence", "confidence"],
  ["prices.provider", "provider"], ["prices.basis", "price_basis"], ["provider", "provider"],
  ["price_basis", "price_basis"],
  // train-plan fields (the flags of gpuplan train-plan)
  ["method", "method"], ["tokens", "tokens"], ["epochs", "epochs", "tokens"], ["samples", "samples", "tokens"],
  ["seq_len", "seq_len"], ["deadline_hours", "deadline_hours"], ["objective", "train_objective", "objective"],
  ["max_gpus", "max_gpus"], ["gpus", "gpus"],
];
const PLAN_COLUMNS = [
  ["gpu", "gpu"], ["count", "count"], ["tp", "tp"], ["pp", "pp"], ["replicas", "repl"],
  ["weight_dtype", "dtype"], ["ttft_ms", "TTFT ms"], ["tpot_ms", "TPOT ms"],
  ["output_tokens_per_s", "tok/s"], ["usd_per_hour", "$/h"], ["usd_per_month", "$/month"],
  ["usd_per_million_output_tokens", "$/1M out"], ["memory_per_gpu_gib", "GiB/GPU"],
];
// The columns of gpuplan train-plan's table.
const TRAIN_COLUMNS = [
  ["gpu", "gpu"], ["gpus", "gpus"], ["layout", "layout"], [(p) => p.step.tokens_per_s_per_gpu, "tok/s/GPU"],
  [(p) => p.step.mfu, "MFU"], [(p) => p.step.step_time_s, "step s"], ["memory_gib_per_gpu", "GiB/GPU"],
  [(p) => p.cost.wall_hours, "hours"], [(p) => p.cost.usd_by_price_kind.on_demand, "$ on-demand"],
  [(p) => p.cost.energy_kwh, "kWh"],
];
const REJECTED_SHOWN = 20;
// The latency columns of each statistic the server says the plans (and so the chart) are on.
const LATENCY_COLUMNS = {
  mean: { ttft_ms: [["ttft_ms", "mean TTFT ms"]], tpot_ms: [["tpot_ms", "mean TPOT ms"]] },
  p99: {
    ttft_ms: [["ttft_p99_ms", "P99 TTFT ms"]],
    tpot_ms: [["tpot_p99_ms", "P99 TPOT ms"], ["p99_source", "P99 from"]],
  },
};
// Figures shown with their interval, "412 (350-980)", as the CLI's table does.
const BANDED = ["ttft_ms", "tpot_ms", "ttft_p99_ms", "tpot_p99_ms", "output_tokens_per_s"];
const LATENCY_NAMES = {
  ttft_ms: "mean TTFT", tpot_ms: "mean TPOT", ttft_p99_ms: "P99 TTFT", tpot_p99_ms: "P99 TPOT",
};
let latest = 0;
let timer = null;
// The request (URL and body, as JSON) that each view's shown results answer; null before the first.
const shown = { inference: null, training: null };

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  return a >= 100 ? Math.round(v).toLocaleString("en-US") : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}

// The name of a form input as the page shows it: its label's text, or its data-label.
function labelOf(id) {
  const el = $(id);
  if (el.dataset.label) return el.dataset.label;
  const label = el.closest("label");
  const text = label && [...label.childNodes].find((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
  return text ? text.textContent.trim() : id;
}

function num(id) {
  const el = $(id);
  // A number input holding text that is not a number reads as "": say so instead of sending nothing.
  if (el.validity && el.validity.badInput) {
    throw { error: `${labelOf(id)}: not a number; type one such as ${el.defaultValue || 1}`, input: id };
  }
  const raw = el.value.trim();
  return raw === "" ? undefined : Number(raw);
}

function list(id) {
  const items = $(id).value.split(",").map((s) => s.trim()).filter((s) => s);
  return items.length ? items : undefined;
}

// The price basis the form chose, as train-plan's flags (--provider, --price-basis); unset when empty.
function basisFields() {
  const provider = $("provider").value.trim();
  return { provider: provider || undefined, price_basis: $("price_basis").value || undefined };
}

// The price basis in words, as the CLI prints it ("Prices: ...").
function basisNote(basis) {
  return basis ? `Prices: ${basis.label} (every GPU on this basis).` : "";
}

function training() {
  return $("wl-training").checked;
}

function applyWorkload() {
  document.body.dataset.workload = training() ? "training" : "inference";
  document.body.dataset.amount = $("amount_kind").value;
}

function trainBody() {
  const amount = $("amount_kind").value === "tokens"
    ? { tokens: num("tokens") } : { epochs: num("epochs"), samples: num("samples") };
  return {
    model: $("model").value.trim(),
    method: $("method").value,
    ...amount,
    seq_len: num("seq_len"),
    gpus: list("gpus"),
    max_gpus: num("max_gpus"),
    deadline_hours: num("deadline_hours"),
    objective: $("train_objective").value,
    ...basisFields(),
  };
}

function body() {
  const load = $("load_kind").value === "rate" ? { rate_rps: num("load") } : { concurrency: num("load") };
  const { provider, price_basis } = basisFields(); // the scenario's prices.provider / prices.basis
  const doc = {
    model: $("model").value.trim(),
    objective: $("objective").value,
    workload: { input_tokens: num("input_tokens"), output_tokens: num("output_tokens"), ...load },
    sla: $("sla_stat").value === "p99"
      ? { ttft_p99_ms: num("ttft_ms"), tpot_p99_ms: num("tpot_ms") }
      : { ttft_ms: num("ttft_ms"), tpot_ms: num("tpot_ms") },
    hardware: { gpus: list("gpus"), max_gpus: num("max_gpus") },
    precision: { allowed: list("dtypes") },
    prices: { max_usd_per_hour: num("budget"), provider, basis: price_basis },
    confidence: num("confidence"),
  };
  const pasted = $("config_json").value.trim();
  if (pasted) {
    try {
      doc.config_json = JSON.parse(pasted);
    } catch (e) {
      throw { error: `${labelOf("config_json")}: not valid JSON (${e.message})`, input: "config_json" };
    }
  }
  return doc;
}

function clearErrors() {
  for (const el of document.querySelectorAll(".error")) el.textContent = "";
  for (const el of document.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

// The form input an error is about and the box it is shown in: a server error names a field (a scenario
// path such as workload.input_tokens), a check in the page names the input itself.
function errorPlace(err) {
  const hit = err.input
    ? FIELD_INPUTS.find(([, input]) => input === err.input) || [err.input, err.input]
    : FIELD_INPUTS.find(([prefix]) => err.field && err.field.startsWith(prefix));
  return hit ? { input: hit[1], box: hit[2] || hit[1] } : { input: null, box: "form" };
}

function showError(err) {
  const { input, box } = errorPlace(err);
  let message = err.error;
  if (input) {
    $(input).setAttribute("aria-invalid", "true");
    // Name the field as the form does ("input tokens", not the document path workload.input_tokens).
    if (err.field && message.startsWith(`${err.field}: `)) {
      message = `${labelOf(input)}: ${message.slice(err.field.length + 2)}`;
    } else if (err.field && message.startsWith(`${err.field} `)) { // "prices.provider 'X' is not ..."
      message = `${labelOf(input)} ${message.slice(err.field.length + 1)}`;
    }
  }
  $(`err-${box}`).textContent = `error: ${message}`;
  document.body.dataset.state = "error";
  $("status").textContent = "";
}

function view() {
  return training() ? "training" : "inference";
}

// The request the form asks for now, as JSON; null while an input is invalid.
function currentKey() {
  try {
    const [url, doc] = request();
    return JSON.stringify([url, doc]);
  } catch {
    return null;
  }
}

// Results are stale when they answer other inputs than the form's (or an input is invalid), until a run
// with these inputs answers: dimmed, under a banner.
function markStale() {
  const answered = shown[view()];
  const stale = answered !== null && answered !== currentKey();
  document.body.dataset.stale = String(stale);
  $("stale").hidden = !stale;
}

function fillList(id, items, render) {
  const ul = $(id);
  ul.replaceChildren(...items.map((item) => {
    const li = document.createElement("li");
    li.textContent = render(item);
    return li;
  }));
}

function fillTable(id, columns, rows, rowClass) {
  const head = document.createElement("tr");
  for (const [, title] of columns) {
    const th = document.createElement("th");
    th.textContent = title;
    head.appendChild(th);
  }
  $(id).tHead.replaceChildren(head);
  $(id).tBodies[0].replaceChildren(...rows.map((row, i) => {
    const tr = document.createElement("tr");
    if (rowClass) tr.className = rowClass(i);
    for (const [key] of columns) {
      const td = document.createElement("td");
      const cell = typeof key === "function" ? key(row) : row[key];
      if (cell instanceof Node) td.appendChild(cell); else td.textContent = fmt(cell);
      if (cell instanceof Node || typeof cell === "string") td.className = "text";
      tr.appendChild(td);
    }
    return tr;
  }));
}

function plot(id, figure) {
  if (!window.Plotly) {
    for (const note of ["charts-note", "train-charts-note"]) {
      $(note).textContent = "Charts need plotly on the server (pip install 'gpuplan[plot]').";
    }
    return;
  }
  window.Plotly.react($(id), figure.data, figure.layout, { responsive: true, displaylogo: false });
}

// A plan's figure with its interval (low-high) when it has one; an open end ("-") is past capacity.
function banded(plan, key) {
  const value = plan[key];
  if (value === null || value === undefined || !plan.low || !plan.high) return value;
  const [low, high] = [plan.low[key], plan.high[key]];
  if (low === value && high === value) return value;
  return `${fmt(value)} (${fmt(low)}-${fmt(high)})`;
}

// The plan table's columns: the latency statistic the plans are on, figures with their intervals, and
// the count at the point estimate when the plans are sized at a confidence.
function planColumns(answer) {
  const latency = LATENCY_COLUMNS[answer.latency_statistic];
  const columns = PLAN_COLUMNS.flatMap(([key, label]) => latency[key] || [[key, label]])
    .map(([key, label]) => (BANDED.includes(key) ? [(p) => banded(p, key), label] : [key, label]));
  if (answer.recommendation.confidence === null) return columns;
  const at = columns.findIndex(([key]) => key === "count") + 1;
  return [...columns.slice(0, at), ["count_at_point_estimate", "at point"], ...columns.slice(at)];
}

function intervalNote(rec) {
  const banded = rec.plans.find((p) => p.interval);
  const level = banded ? `(low-high): the ${Math.round(banded.interval.level * 100)} % interval ` +
    "from the error model of held-out residuals (docs/validate.md, Intervals). " : "";
  const sized = rec.confidence === null ? "Plans are sized at the point estimate."
    : `Plans are sized at ${Math.round(rec.confidence * 100)} % confidence ("at point": the count at ` +
      "the point estimate).";
  return level + sized;
}

function render(answer) {
  const rec = answer.recommendation;
  fillTable("plans", planColumns(answer), rec.plans, (i) => (i === 0 ? "best" : ""));
  $("interval-note").textContent = intervalNote(rec);
  fillList("explanation", rec.explanation, (s) => s);
  $("price-basis").textContent = basisNote(rec.price_basis);
  fillList("rejected", rec.rejected, (r) => `${r.gpu} (${r.kind}): ${r.reason}`);
  fillList("assumptions", rec.assumptions, (s) => s);
  const b = answer.search;
  $("bound").textContent = `Search bound: plans of up to ${b.max_gpus_searched} GPUs ` +
    `(asked ${b.max_gpus_requested}, web limit ${b.max_gpus_limit}), ${b.time_limit_s} s of compute.`;
  const name = LATENCY_NAMES[answer.latency_field];
  $("latency-note").textContent = `Latency axis: ${name} at the target load, ms (the table's ` +
    `"${name} ms" column; plans were sized on ${answer.latency_statistic === "p99" ? "P99s" : "means"}).`;
  for (const chart of ["pareto", "memory", "throughput"]) plot(`chart-${chart}`, answer.figures[chart]);
  $("status").textContent = `${rec.plans.length} plans for ${rec.model}; best: ${rec.plans[0].count}x ${rec.plans[0].gpu}`;
  document.body.dataset.state = "ready";
}

function renderTraining(answer) {
  const result = answer.result;
  fillTable("train-plans", TRAIN_COLUMNS, result.plans, (i) => (i === 0 ? "best" : ""));
  const more = result.rejected.length - REJECTED_SHOWN;
  fillList("train-rejected", result.rejected.slice(0, REJECTED_SHOWN).concat(more > 0 ? [[`(+${more} more)`, ""]] : []),
    ([name, why]) => (why ? `${name}: ${why}` : name));
  fillList("train-why", result.why, (s) => s);
  $("train-price-basis").textContent = basisNote(result.price_basis);
  const b = answer.search;
  $("train-bound").textContent = `Search bound: up to ${b.max_gpus_searched} GPUs ` +
    `(asked ${b.max_gpus_requested}, web limit ${b.max_gpus_limit}), ${b.time_limit_s} s of compute. ` +
    "Cost is the on-demand price of the whole run.";
  for (const name of ["pareto", "memory"]) plot(`chart-train-${name}`, answer.figures[name]);
  const best = result.plans[0];
  $("status").textContent = `${result.plans.length} training plans for ${result.model} (${result.method}); ` +
    `best: ${best.gpus}x ${best.gpu}, ${fmt(best.cost.wall_hours)} h`;
  document.body.dataset.state = "ready";
}

function request() {
  if (training()) return ["/api/plots/train-plan", trainBody(), renderTraining];
  const query = new URLSearchParams({ cost_axis: $("cost_axis").value, latency_axis: $("latency_axis").value });
  return [`/api/plots/recommend?${query}`, body(), render];
}

async function run() {
  const ticket = ++latest;
  clearErrors();
  applyWorkload();
  markStale();
  let url, doc, show;
  try {
    [url, doc, show] = request();
  } catch (err) {
    showError(err);
    return;
  }
  const key = JSON.stringify([url, doc]);
  const kind = view();
  document.body.dataset.state = "busy";
  $("status").textContent = "searching...";
  let response, answer;
  try {
    response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(doc),
    });
    answer = await response.json();
  } catch (e) {
    answer = { error: `the server did not answer (${e.message}); is gpuplan web still running?` };
  }
  if (ticket !== latest) return; // a newer request is on its way
  if (response && response.ok) {
    show(answer);
    shown[kind] = key;
  } else {
    showError(answer);
  }
  markStale();
}

function link(url, text) {
  const a = document.createElement("a");
  if (/^https?:\/\//.test(url)) a.href = url;
  a.textContent = text;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  return a;
}

async function loadCatalog() {
  const [models, catalog, chart] = await Promise.all(
    ["/api/models", "/api/gpus", "/api/plots/gpus"].map((u) => fetch(u).then((r) => r.json())));
  const providers = [...new Set(catalog.prices.filter((p) => p.kind !== "purchase").map((p) => p.provider))];
  $("provider-list").replaceChildren(...providers.sort().map((name) => new Option(name, name)));
  $("model-list").replaceChildren(...models.models.map((m) => new Option(`${m.params_b.toFixed(1)} B`, m.id)));
  const offers = Object.fromEntries((chart.offers || []).map((o) => [o.gpu, o]));
  const columns = [
    ["id", "GPU"], ["vendor", "vendor"], [(g) => fmt(g.memory_bytes / 1e9), "mem GB"],
    [(g) => fmt(g.memory_bandwidth_bytes_per_s / 1e12), "TB/s"],
    [(g) => fmt(g.dense_tflops.bf16 || g.dense_tflops.fp16), "BF16 TFLOPS"],
    [(g) => fmt(g.dense_tflops.fp8), "FP8 TFLOPS"], [(g) => fmt(g.tdp_watts), "TDP W"],
    [(g) => fmt(offers[g.id] && offers[g.id].usd_per_gpu_hour), "$/GPU-h"],
    [(g) => link(g.sources.memory_bandwidth_bytes_per_s || Object.values(g.sources)[0] || "", "spec"), "source"],
    [(g) => link(((offers[g.id] && offers[g.id].price_source) || "").split(" ").pop(), "price"), "price source"],
  ];
  fillTable("gpu-table", columns, catalog.gpus);
  if (chart.figure) plot("chart-gpus", chart.figure);
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(run, 400);
}

function edited() {
  applyWorkload();
  markStale();
  schedule();
}

document.addEventListener("DOMContentLoaded", () => {
  $("form").addEventListener("input", edited);
  $("form").addEventListener("change", edited);
  $("form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  $("rerun").addEventListener("click", run);
  $("cost_axis").addEventListener("change", run);
  $("latency_axis").addEventListener("change", run);
  loadCatalog();
  run();
});
