// The agent page's "Try it" console: the typed text is sent as the person logged in (the
// console's own endpoint, with the session and its CSRF token), and each event of the task's
// stream (A2A 1.0 stream responses, as server-sent events) is shown as it arrives.
(function () {
  "use strict";
  const box = document.getElementById("tryit");
  if (!box) return;
  const form = document.getElementById("tryit-form");
  const textInput = document.getElementById("tryit-text");
  const sendButton = document.getElementById("tryit-send");
  const log = document.getElementById("tryit-log");
  const status = document.getElementById("tryit-status");
  const taskLink = document.getElementById("tryit-task-link");
  const csrfToken = form.querySelector("input[name=csrfmiddlewaretoken]").value;

  function textOf(parts) {
    return (parts || []).map((p) => p.text ?? (p.data !== undefined ? JSON.stringify(p.data) : p.filename || p.url || "[file]")).join(" ");
  }

  function describe(result) {
    if (result.task) return ["task", result.task.status && result.task.status.state, result.task.id, ""];
    if (result.statusUpdate) {
      const u = result.statusUpdate;
      return ["status-update", u.status && u.status.state, u.taskId, textOf(u.status && u.status.message && u.status.message.parts)];
    }
    if (result.artifactUpdate) {
      const u = result.artifactUpdate;
      return ["artifact-update", "", u.taskId, textOf(u.artifact && u.artifact.parts)];
    }
    if (result.message) return ["message", "", result.message.taskId, textOf(result.message.parts)];
    return ["unknown", "", "", ""];
  }

  const HEAD_CHARS = 300;

  function show(kind, state, text, raw) {
    const item = document.createElement("li");
    item.className = "event";
    item.dataset.kind = kind;
    item.dataset.state = state || "";
    const head = document.createElement("span");
    head.className = "event-head";
    // A line per event: a long text is cut here (the JSON below holds it whole), or one long
    // reply would make the page as long as the reply.
    const shown = text && text.length > HEAD_CHARS ? text.slice(0, HEAD_CHARS) + "…" : text;
    head.textContent = kind + (state ? " · " + state : "") + (shown ? " · " + shown : "");
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "JSON";
    const pre = document.createElement("pre");
    pre.textContent = typeof raw === "string" ? raw : JSON.stringify(raw, null, 2);
    details.append(summary, pre);
    item.append(head, details);
    log.append(item);
  }

  function linkTask(taskId) {
    if (!taskId || !taskLink.hidden || !box.dataset.taskUrl) return;
    taskLink.href = box.dataset.taskUrl.replace("00000000-0000-0000-0000-000000000000", taskId);
    taskLink.hidden = false;
  }

  function handle(data) {
    let body;
    try { body = JSON.parse(data); } catch (e) { show("unparsable", "", data, data); return; }
    if (body.error) { show("error", "", body.error.message, body); return; }
    const [kind, state, taskId, text] = describe(body);
    show(kind, state, text, body);
    linkTask(taskId);
  }

  // A refusal before the stream: the console's JSON {"ok": false, "message"}; anything else
  // (a login page after the session ended, a proxy's error page) is said in a line.
  async function refusal(response) {
    const text = await response.text();
    let body = null;
    try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
    if (body && body.message) return body.message;
    if (response.redirected || response.status === 403) {
      return "the console did not take the request (HTTP " + response.status + "); reload the page, logging in again if asked.";
    }
    return "HTTP " + response.status + " " + response.statusText;
  }

  async function send(event) {
    event.preventDefault();
    sendButton.disabled = true;
    log.replaceChildren();
    taskLink.hidden = true;
    status.className = "muted";
    status.textContent = "Sending…";
    try {
      const response = await fetch(box.dataset.url, {
        method: "POST",
        credentials: "same-origin",
        headers: {"Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": csrfToken},
        body: JSON.stringify({text: textInput.value}),
      });
      const type = response.headers.get("Content-Type") || "";
      if (!response.ok || !type.startsWith("text/event-stream")) {
        const message = await refusal(response);
        show("error", "", message, message);
        status.className = "error";
        status.textContent = "Not sent: " + message;
        return;
      }
      status.textContent = "Streaming…";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data) handle(data);
        }
      }
      status.textContent = "Stream ended.";
    } catch (e) {
      status.className = "error";
      status.textContent = "Failed: " + e;
    } finally {
      sendButton.disabled = false;
    }
  }

  form.addEventListener("submit", send);
})();
