// The task page's actions, as the person logged in: cancel the task, and reply when the agent
// asked for input. Both POST to the console's own endpoints with the session and its CSRF
// token; the answer says whether the platform took the request, and the live stream (task.js)
// shows what follows. Each action taken is added to the page's list of console actions.
(function () {
  "use strict";
  const box = document.getElementById("actions");
  if (!box) return;
  const cancelForm = document.getElementById("cancel-form");
  const replyForm = document.getElementById("reply-form"); // absent while the agent is disabled
  const replyText = document.getElementById("reply-text");
  const status = document.getElementById("action-status");
  const actionLog = document.getElementById("action-log");
  const terminal = new Set(box.dataset.terminalStates.split(/\s+/).filter(Boolean));
  const interrupted = new Set(box.dataset.interruptedStates.split(/\s+/).filter(Boolean));

  async function post(form, body) {
    const token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
    const response = await fetch(form.action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": token },
      body: JSON.stringify(body),
    });
    let answer = null;
    try { answer = await response.json(); } catch (e) { /* not the console's JSON */ }
    if (answer && answer.ok) return answer;
    if (answer && answer.message) throw new Error(answer.message);
    if (response.redirected || response.status === 403) {
      throw new Error("the console did not take the request (HTTP " + response.status + "); reload the page, logging in again if asked");
    }
    throw new Error("HTTP " + response.status + " " + response.statusText);
  }

  function busy(flag) {
    for (const form of [cancelForm, replyForm]) {
      if (form) for (const control of form.elements) control.disabled = flag;
    }
  }

  // The record the console kept, as the server renders it in task.html; text only.
  function addRecord(recorded) {
    if (!recorded || !actionLog) return;
    const item = document.createElement("li");
    const time = document.createElement("time");
    time.dateTime = recorded.at;
    time.textContent = recorded.at.replace("T", " ").slice(0, 19);
    const who = document.createElement("strong");
    who.textContent = recorded.by;
    const what = document.createElement("span");
    what.className = "what";
    what.textContent = recorded.what;
    item.append(time, " · ", who, " · ", what);
    actionLog.append(item);
    document.getElementById("console-actions").hidden = false;
  }

  async function act(what, form, body) {
    busy(true);
    status.className = "muted";
    status.textContent = what + "…";
    try {
      const answer = await post(form, body);
      status.textContent = what + ": accepted; " + answer.message;
      addRecord(answer.recorded);
      return true;
    } catch (error) {
      status.className = "error";
      status.textContent = what + " refused: " + error.message;
      return false;
    } finally {
      busy(false);
    }
  }

  // console.js asked for confirmation first (the form's data-confirm) and stopped the submit
  // if the answer was no.
  cancelForm.addEventListener("submit", function (event) {
    if (event.defaultPrevented) return;
    event.preventDefault();
    act("Cancel", cancelForm, {});
  });

  if (replyForm) {
    replyForm.addEventListener("submit", async function (event) {
      event.preventDefault();
      if (await act("Reply", replyForm, { text: replyText.value })) replyText.value = "";
    });
  }

  // The controls follow the live state: a reply only while the agent waits for input, nothing
  // once the task is over.
  document.addEventListener("taskstate", function (event) {
    box.hidden = terminal.has(event.detail);
    if (replyForm) replyForm.hidden = !interrupted.has(event.detail);
  });
})();
