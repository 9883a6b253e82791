// What every console page shares. Forms that destroy or stop something carry data-confirm: the
// browser asks before sending. And message ids for the pages that call agents (Try it, a task's
// actions): crypto.randomUUID exists only on secure pages (https or localhost), so a console
// reached over plain http elsewhere makes them from crypto.getRandomValues.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);

  window.consoleMessageId = function () {
    if (crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  };
})();
