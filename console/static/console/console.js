// What every console page shares: forms that destroy or stop something carry data-confirm, and
// the browser asks before sending.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);
})();
