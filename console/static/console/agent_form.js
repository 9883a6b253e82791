// The agent forms (console and admin): show only the chosen executor kind's group of fields,
// and "test connection". Without this script every group shows, each with its legend, and the
// server takes the chosen kind's only.
//
// Test connection posts the whole form (the chosen kind, its fields, any typed secret, the CSRF
// token) to the button's data-url and shows the JSON answer {ok, message} in the status
// element beside the button (role="status"). The answer never carries a secret.
(function () {
  "use strict";

  // A group's kind as its class names it (the admin's fieldsets carry no data attributes):
  // the kind's name with "-" as "_", as in the fields' names.
  function slugOf(kind) {
    return kind.replace(/-/g, "_");
  }
  function groupSlug(group) {
    const match = group.className.match(/kind-group--(\S+)/);
    return match ? match[1] : "";
  }

  function toggleGroups() {
    const select = document.getElementById("id_executor_kind");
    const groups = Array.from(document.querySelectorAll(".kind-group"));
    if (!select || !groups.length) return;
    function showChosen() {
      groups.forEach(function (group) {
        const chosen = groupSlug(group) === slugOf(select.value);
        group.hidden = !chosen;
        group.style.display = chosen ? "" : "none";  // the admin's stylesheet knows no [hidden]
      });
    }
    select.addEventListener("change", showChosen);
    showChosen();
  }
  // The admin loads this script in the page's head: wait for the form.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", toggleGroups);
  else toggleGroups();

  function statusFor(button) {
    const id = button.getAttribute("aria-describedby");
    return (id && document.getElementById(id)) || button.parentElement.querySelector("[role=status]");
  }

  async function test(button) {
    const status = statusFor(button);
    const form = button.form || button.closest("form");
    const body = new FormData(form);
    button.disabled = true;
    status.dataset.ok = "";
    status.textContent = "Testing…";
    try {
      const response = await fetch(button.dataset.url, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: {"Accept": "application/json", "X-CSRFToken": body.get("csrfmiddlewaretoken") || ""},
      });
      const type = response.headers.get("Content-Type") || "";
      if (!type.includes("application/json")) {
        status.dataset.ok = "false";
        status.textContent = response.status === 403
          ? "Not allowed: only the tenant's owners test connections."
          : "The test could not run (HTTP " + response.status + ").";
        return;
      }
      const answer = await response.json();
      status.dataset.ok = answer.ok ? "true" : "false";
      status.textContent = (answer.ok ? "Connected: " : "") + answer.message;
    } catch (error) {
      status.dataset.ok = "false";
      status.textContent = "The test could not run: " + error.message;
    } finally {
      button.disabled = false;
    }
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("[data-test-connection]");
    if (!button) return;
    event.preventDefault();
    test(button);
  });
})();
