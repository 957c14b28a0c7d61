// SciMesh dashboard: the live parts, with Server-Sent Events. Plain
// JavaScript, no build step, nothing loaded from elsewhere.
"use strict";

function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text;
}

// A job's page: progress and counts follow the job until it is final, then
// the page reloads to show the final state, the chart and the download.
function followJob(section) {
  const es = new EventSource(section.dataset.events);
  es.addEventListener("progress", (e) => {
    const j = JSON.parse(e.data);
    const bar = document.getElementById("progress");
    if (bar) bar.value = j.progress;
    setText("percent", j.percent);
    const status = document.getElementById("status");
    if (status) { status.textContent = j.status; status.className = "status " + j.status; }
    for (const k of ["total", "pending", "leased", "completed", "failed", "cancelled"]) setText(k, j.tasks[k] ?? 0);
    const line = document.getElementById("chart-line");
    if (line && j.chart) line.setAttribute("points", j.chart);
    if (j.xticks) drawTimeAxis(j.xticks, j.xtitle);
    setText("chart-caption", j.caption);
    if (j.best) drawBest(j.best);
  });
  es.addEventListener("done", () => { es.close(); window.location.reload(); });
  es.addEventListener("failure", (e) => { es.close(); setText("percent", e.data); });
}

// The best rows so far, drawn again as chunks complete.
function drawBest(best) {
  const table = document.getElementById("best");
  if (!table) return;
  const row = (cells, tag) => {
    const tr = document.createElement("tr");
    for (const c of cells) { const td = document.createElement(tag); td.textContent = c; tr.append(td); }
    return tr;
  };
  table.tHead.replaceChildren(row(best.header || [], "th"));
  table.tBodies[0].replaceChildren(...(best.rows || []).map((r) => row(r, "td")));
  setText("best-caption", best.header
    ? "The best " + best.rows.length + " rows over " + best.done + " of " + best.total + " chunks."
    : "No chunk has completed yet.");
}

// The chart's time axis grows with the job: its ticks are drawn again.
function drawTimeAxis(ticks, title) {
  const g = document.getElementById("chart-xticks");
  if (!g) return;
  const ns = "http://www.w3.org/2000/svg";
  g.replaceChildren();
  for (const t of ticks) {
    const mark = document.createElementNS(ns, "line");
    for (const [k, v] of [["x1", t.at], ["x2", t.at], ["y1", 160], ["y2", 165]]) mark.setAttribute(k, v);
    const label = document.createElementNS(ns, "text");
    for (const [k, v] of [["x", t.at], ["y", 179], ["text-anchor", "middle"]]) label.setAttribute(k, v);
    label.textContent = t.label;
    g.append(mark, label);
  }
  setText("chart-xtitle", title);
}

// A task's page: its log, then new lines as they come, until it is final.
function followLog(pre) {
  const es = new EventSource(pre.dataset.log);
  es.addEventListener("line", (e) => {
    const l = JSON.parse(e.data);
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append("[attempt " + l.attempt + "] " + l.line + "\n");
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  });
  es.addEventListener("done", () => {
    es.close();
    const status = document.getElementById("log-status");
    if (status && !status.dataset.final) { status.dataset.final = "1"; status.textContent = "The task is final; this is its whole log."; }
  });
  es.addEventListener("failure", (e) => { es.close(); setText("log-status", e.data); });
}

// The new-job page: the file chosen uploads at once, its progress shown;
// the form is sent with the upload's ID once it has arrived.
function newJobForm(form) {
  const file = document.getElementById("file");
  const bar = document.getElementById("upload-progress");
  const submit = document.getElementById("submit");
  const name = document.getElementById("name");
  const status = document.getElementById("upload-status");
  let autoName = form.elements.upload_name.value;
  file.addEventListener("change", () => {
    const f = file.files[0];
    if (!f) return;
    form.elements.upload_id.value = "";
    submit.disabled = true;
    status.className = "";
    if (name.value === "" || name.value === autoName) name.value = f.name;
    autoName = f.name;
    bar.max = Math.max(f.size, 1);
    bar.value = 0;
    setText("upload-status", "Uploading " + f.name + "…");
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.upload);
    xhr.setRequestHeader("Content-Type", "text/csv");
    xhr.setRequestHeader("X-CSRF-Token", form.elements.csrf.value);
    xhr.upload.addEventListener("progress", (e) => {
      if (!e.lengthComputable) return;
      bar.max = Math.max(e.total, 1);
      bar.value = e.loaded;
      setText("upload-status", "Uploading " + f.name + ": " + Math.floor(100 * e.loaded / Math.max(e.total, 1)) + "%");
    });
    xhr.addEventListener("load", () => {
      if (xhr.status !== 201) {
        bar.value = 0;
        status.className = "error";
        setText("upload-status", "The upload of " + f.name + " was refused: " + xhr.responseText.trim());
        return;
      }
      const up = JSON.parse(xhr.responseText);
      bar.value = bar.max;
      form.elements.upload_id.value = up.upload_id;
      form.elements.upload_name.value = f.name;
      form.elements.rows.value = up.rows - 1; // the header is a record too
      setText("upload-status", "Uploaded " + f.name + ": " + (up.rows - 1) + " rows below the header, " + up.bytes + " bytes.");
      submit.disabled = false;
    });
    xhr.addEventListener("error", () => {
      status.className = "error";
      setText("upload-status", "The upload of " + f.name + " failed: the coordinator did not answer. Try again.");
    });
    xhr.send(f);
  });
  form.addEventListener("submit", () => { submit.disabled = true; });
}

document.addEventListener("DOMContentLoaded", () => {
  const newJob = document.getElementById("new-job");
  if (newJob) newJobForm(newJob);
  const live = document.getElementById("live");
  if (live && live.dataset.events && live.dataset.final !== "true") followJob(live);
  const log = document.getElementById("log");
  if (log && log.dataset.log) followLog(log);
  for (const id of ["status-filter", "state-filter"]) {
    const sel = document.getElementById(id);
    if (sel) sel.addEventListener("change", () => sel.form.submit());
  }
});
