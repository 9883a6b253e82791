// The task page, live: follows the task's event stream (server-sent events after the last
// event the page rendered), appends each event to the timeline, keeps the state badge current,
// and re-reads the status, history and artifacts sections when they may have changed.
(function () {
  "use strict";
  const box = document.getElementById("events");
  const timeline = document.getElementById("timeline");
  const badge = document.getElementById("task-state");
  const live = document.getElementById("live-status");
  if (!box || !timeline || !badge || typeof EventSource === "undefined") return;

  const terminal = new Set((box.dataset.terminalStates || "").split(/\s+/).filter(Boolean));
  let lastSeq = parseInt(box.dataset.lastSeq || "0", 10) || 0;
  let source = null;
  let refreshTimer = null;

  function setState(state) {
    if (!state) return;
    badge.textContent = state;
    badge.className = "state s-" + state.toLowerCase();
    box.dataset.state = state;
    document.dispatchEvent(new CustomEvent("taskstate", { detail: state }));
  }

  function stateBadge(state) {
    const span = document.createElement("span");
    span.className = "state s-" + state.toLowerCase();
    span.textContent = state;
    return span;
  }

  function cell(row, content, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    row.append(td);
    return td;
  }

  // The same row as the server renders (task_event.html); text only, never HTML.
  function appendEvent(frame) {
    const row = document.createElement("tr");
    row.className = "event";
    row.dataset.seq = String(frame.seq);
    row.dataset.kind = frame.kind;
    cell(row, String(frame.seq), "mono");
    cell(row, frame.kind);
    cell(row, frame.state ? stateBadge(frame.state) : "");
    const time = document.createElement("time");
    time.dateTime = frame.created_at;
    time.textContent = frame.created_at.replace("T", " ").slice(0, 19);
    cell(row, time, "nowrap");
    cell(row, frame.summary, "summary");
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "JSON";
    const pre = document.createElement("pre");
    pre.className = "json";
    pre.textContent = JSON.stringify(frame.data, null, 2);
    details.append(summary, pre);
    cell(row, details);
    timeline.append(row);
  }

  // Re-read the page and take its server-rendered (escaped) sections as they are now.
  async function refreshSections() {
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of ["status", "history", "artifacts"]) {
        const fresh = page.getElementById(id);
        const here = document.getElementById(id);
        if (fresh && here) here.innerHTML = fresh.innerHTML;
      }
    } catch (error) {
      // The timeline stays live; the sections catch up on the next refresh or a reload.
    }
  }

  function scheduleRefresh() {
    if (refreshTimer) clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshSections, 250);
  }

  function finish(state) {
    setState(state);
    if (source) source.close();
    source = null;
    live.textContent = "";
    scheduleRefresh();
  }

  function follow() {
    const url = new URL(box.dataset.eventsUrl, window.location.href);
    url.searchParams.set("after", String(lastSeq));
    source = new EventSource(url.toString());
    live.textContent = "live";
    source.onopen = function () {
      live.textContent = "live";
    };
    source.onmessage = function (message) {
      const frame = JSON.parse(message.data);
      if (frame.seq <= lastSeq) return; // already shown
      lastSeq = frame.seq;
      appendEvent(frame);
      setState(frame.state);
      if (terminal.has(frame.state)) finish(frame.state);
      else scheduleRefresh();
    };
    source.addEventListener("end", function (message) {
      finish(JSON.parse(message.data).state);
    });
    source.onerror = function () {
      // The browser reconnects by itself (sending Last-Event-ID) unless the server refused.
      if (source && source.readyState === EventSource.CLOSED) {
        live.textContent = "live updates stopped; reload the page";
        source = null;
      } else {
        live.textContent = "reconnecting…";
      }
    };
  }

  if (!terminal.has(box.dataset.state)) follow();
})();
