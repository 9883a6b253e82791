// The task page's actions: cancel the task, and reply when the agent asked for input. Both go
// through the agent's own JSON-RPC endpoint (A2A 1.0), as the Try-it console does, with the
// API key typed here (kept for the tab, shared with Try it). The live stream (task.js) shows
// what follows; this only says whether the agent accepted the request.
(function () {
  "use strict";
  const box = document.getElementById("actions");
  if (!box) return;
  const keyInput = document.getElementById("action-key");
  const cancelButton = document.getElementById("cancel-task");
  const replyForm = document.getElementById("reply-form");
  const replyText = document.getElementById("reply-text");
  const status = document.getElementById("action-status");
  const storageKey = "tryit-key:" + box.dataset.endpoint;
  const terminal = new Set(box.dataset.terminalStates.split(/\s+/).filter(Boolean));
  const interrupted = new Set(box.dataset.interruptedStates.split(/\s+/).filter(Boolean));
  keyInput.value = sessionStorage.getItem(storageKey) || "";

  async function call(method, params) {
    const headers = { "Content-Type": "application/json", "A2A-Version": "1.0" };
    const key = keyInput.value.trim();
    if (key) {
      headers["X-API-Key"] = key;
      sessionStorage.setItem(storageKey, key);
    }
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
    const response = await fetch(box.dataset.endpoint, { method: "POST", headers, body, credentials: "omit" });
    let answer;
    try { answer = await response.json(); } catch (e) { answer = null; }
    if (answer && answer.error) throw new Error(answer.error.message + " (" + answer.error.code + ")");
    if (!response.ok || !answer) throw new Error("the agent answered HTTP " + response.status);
    return answer.result;
  }

  function busy(flag) {
    cancelButton.disabled = flag;
    for (const control of replyForm.elements) control.disabled = flag;
  }

  async function act(what, method, params) {
    busy(true);
    status.className = "muted";
    status.textContent = what + "…";
    try {
      const result = await call(method, params);
      const task = result.task || result;
      const state = task && task.status ? task.status.state : "";
      status.textContent = what + ": accepted" + (state ? "; the task is " + state : "") + ".";
      return true;
    } catch (error) {
      status.className = "error";
      status.textContent = what + " refused: " + error.message;
      return false;
    } finally {
      busy(false);
    }
  }

  cancelButton.addEventListener("click", function () {
    if (!window.confirm("Cancel this task? The agent stops working on it; this cannot be undone.")) return;
    act("Cancel", "CancelTask", { id: box.dataset.taskId });
  });

  replyForm.addEventListener("submit", async function (event) {
    event.preventDefault();
    const message = {
      messageId: window.consoleMessageId(), role: "ROLE_USER", parts: [{ text: replyText.value }],
      taskId: box.dataset.taskId, contextId: box.dataset.contextId,
    };
    if (await act("Reply", "SendMessage", { message, configuration: { returnImmediately: true } })) {
      replyText.value = "";
    }
  });

  // The controls follow the live state: a reply only while the agent waits for input, nothing
  // once the task is over.
  document.addEventListener("taskstate", function (event) {
    box.hidden = terminal.has(event.detail);
    replyForm.hidden = !interrupted.has(event.detail);
  });
})();
