// The agent page's "Try it" console: one SendStreamingMessage (A2A 1.0, JSON-RPC) through the
// platform's own endpoint, each server-sent event shown as it arrives.
(function () {
  "use strict";
  const box = document.getElementById("tryit");
  if (!box) return;
  const keyInput = document.getElementById("tryit-key");
  const textInput = document.getElementById("tryit-text");
  const sendButton = document.getElementById("tryit-send");
  const log = document.getElementById("tryit-log");
  const status = document.getElementById("tryit-status");
  const taskLink = document.getElementById("tryit-task-link");
  const storageKey = "tryit-key:" + box.dataset.endpoint;

  if (keyInput.value) sessionStorage.setItem(storageKey, keyInput.value);
  else keyInput.value = sessionStorage.getItem(storageKey) || "";

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

  function show(kind, state, text, raw) {
    const item = document.createElement("li");
    item.className = "event";
    item.dataset.kind = kind;
    item.dataset.state = state || "";
    const head = document.createElement("span");
    head.className = "event-head";
    head.textContent = kind + (state ? " · " + state : "") + (text ? " · " + text : "");
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "JSON";
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(raw, null, 2);
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
    const result = body.result || body;
    const [kind, state, taskId, text] = describe(result);
    show(kind, state, text, body);
    linkTask(taskId);
  }

  async function send() {
    sendButton.disabled = true;
    log.replaceChildren();
    taskLink.hidden = true;
    status.textContent = "Sending…";
    const headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "A2A-Version": "1.0"};
    const key = keyInput.value.trim();
    if (key) { headers["X-API-Key"] = key; sessionStorage.setItem(storageKey, key); }
    const request = {
      jsonrpc: "2.0", id: 1, method: "SendStreamingMessage",
      params: {message: {messageId: window.consoleMessageId(), role: "ROLE_USER", parts: [{text: textInput.value}]}},
    };
    try {
      const response = await fetch(box.dataset.endpoint, {method: "POST", headers, body: JSON.stringify(request), credentials: "omit"});
      const type = response.headers.get("Content-Type") || "";
      if (!type.startsWith("text/event-stream")) {
        const text = await response.text();
        let body; try { body = JSON.parse(text); } catch (e) { body = text; }
        show("error", "", (body.error && body.error.message) || response.status + " " + response.statusText, body);
        status.textContent = "The agent answered HTTP " + response.status + ".";
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
      status.textContent = "Failed: " + e;
    } finally {
      sendButton.disabled = false;
    }
  }

  sendButton.addEventListener("click", send);
  textInput.addEventListener("keydown", (e) => { if (e.key === "Enter") send(); });
})();
