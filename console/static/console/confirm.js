// Forms that destroy or stop something carry data-confirm: the browser asks before sending.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);
})();
