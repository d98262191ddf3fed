// gpuplan page: form -> POST /api/plots/recommend (inference) or /api/plots/train-plan (training)
// -> table + plotly charts. No build step, no CDN.
"use strict";

const $ = (id) => document.getElementById(id);
// Server error "field" (a scenario path or an id kind) -> the form input it is shown next to.
const FIELD_INPUTS = [
  ["workload.input_tokens", "input_tokens"], ["workload.output_tokens", "output_tokens"],
  ["workload.rate_rps", "load"], ["workload.concurrency", "load"], ["sla.ttft_ms", "ttft_ms"],
  ["sla.tpot_ms", "tpot_ms"], ["sla.ttft_p99_ms", "ttft_ms"], ["sla.tpot_p99_ms", "tpot_ms"],
  ["prices.max_usd_per_hour", "budget"], ["hardware.max_gpus", "max_gpus"],
  ["hardware.gpus", "gpus"], ["GPU", "gpus"], ["precision.allowed", "dtypes"], ["dtype", "dtypes"],
  ["config_json", "config_json"], ["model", "model"],
  // train-plan fields (the flags of gpuplan train-plan)
  ["method", "method"], ["tokens", "tokens"], ["epochs", "tokens"], ["samples", "tokens"],
  ["seq_len", "seq_len"], ["deadline_hours", "deadline_hours"], ["objective", "objective"],
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
let latest = 0;
let timer = null;

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  return a >= 100 ? Math.round(v).toLocaleString("en-US") : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}

function num(id) {
  const raw = $(id).value.trim();
  return raw === "" ? undefined : Number(raw);
}

function list(id) {
  const items = $(id).value.split(",").map((s) => s.trim()).filter((s) => s);
  return items.length ? items : undefined;
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
  };
}

function body() {
  const load = $("load_kind").value === "rate" ? { rate_rps: num("load") } : { concurrency: num("load") };
  const doc = {
    model: $("model").value.trim(),
    objective: $("objective").value,
    workload: { input_tokens: num("input_tokens"), output_tokens: num("output_tokens"), ...load },
    sla: $("sla_stat").value === "p99"
      ? { ttft_p99_ms: num("ttft_ms"), tpot_p99_ms: num("tpot_ms") }
      : { ttft_ms: num("ttft_ms"), tpot_ms: num("tpot_ms") },
    hardware: { gpus: list("gpus"), max_gpus: num("max_gpus") },
    precision: { allowed: list("dtypes") },
    prices: { max_usd_per_hour: num("budget") },
  };
  const pasted = $("config_json").value.trim();
  if (pasted) {
    try {
      doc.config_json = JSON.parse(pasted);
    } catch (e) {
      throw { error: `config.json: not valid JSON (${e.message})`, field: "config_json" };
    }
  }
  return doc;
}

function clearErrors() {
  for (const el of document.querySelectorAll(".error")) el.textContent = "";
}

function showError(err) {
  const hit = FIELD_INPUTS.find(([prefix]) => err.field && err.field.startsWith(prefix));
  const box = $(hit ? `err-${hit[1]}` : "err-form");
  box.textContent = `error: ${err.error}`;
  document.body.dataset.state = "error";
  $("status").textContent = "";
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

function render(answer) {
  const rec = answer.recommendation;
  const tail = rec.plans.some((p) => p.sized_on === "p99");
  const columns = tail
    ? PLAN_COLUMNS.flatMap(([key, label]) =>
        key === "ttft_ms" ? [["ttft_p99_ms", "P99 TTFT ms"]]
          : key === "tpot_ms" ? [["tpot_p99_ms", "P99 TPOT ms"], ["p99_source", "P99 from"]] : [[key, label]])
    : PLAN_COLUMNS;
  fillTable("plans", columns, rec.plans, (i) => (i === 0 ? "best" : ""));
  fillList("explanation", rec.explanation, (s) => s);
  fillList("rejected", rec.rejected, (r) => `${r.gpu} (${r.kind}): ${r.reason}`);
  fillList("assumptions", rec.assumptions, (s) => s);
  const b = answer.search;
  $("bound").textContent = `Search bound: plans of up to ${b.max_gpus_searched} GPUs ` +
    `(asked ${b.max_gpus_requested}, web limit ${b.max_gpus_limit}), ${b.time_limit_s} s of compute.`;
  for (const name of ["pareto", "memory", "throughput"]) plot(`chart-${name}`, answer.figures[name]);
  $("status").textContent = `${rec.plans.length} plans for ${rec.model}; best: ${rec.plans[0].count}x ${rec.plans[0].gpu}`;
  document.body.dataset.state = "ready";
}

function renderTraining(answer) {
  const result = answer.result;
  fillTable("train-plans", TRAIN_COLUMNS, result.plans, (i) => (i === 0 ? "best" : ""));
  const more = result.rejected.length - REJECTED_SHOWN;
  fillList("train-rejected", result.rejected.slice(0, REJECTED_SHOWN).concat(more > 0 ? [[`(+${more} more)`, ""]] : []),
    ([name, why]) => (why ? `${name}: ${why}` : name));
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
  let url, doc, show;
  try {
    [url, doc, show] = request();
  } catch (err) {
    showError(err);
    return;
  }
  document.body.dataset.state = "busy";
  $("status").textContent = "searching...";
  const response = await fetch(url, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(doc),
  });
  const answer = await response.json();
  if (ticket !== latest) return; // a newer request is on its way
  if (response.ok) show(answer); else showError(answer);
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

document.addEventListener("DOMContentLoaded", () => {
  $("form").addEventListener("change", applyWorkload);
  $("form").addEventListener("input", schedule);
  $("form").addEventListener("change", schedule);
  $("form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  $("cost_axis").addEventListener("change", run);
  $("latency_axis").addEventListener("change", run);
  loadCatalog();
  run();
});
