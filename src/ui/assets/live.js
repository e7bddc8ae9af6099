// Live updates without a reload: the server says when the fleet changed (server-sent
// events); the page fetches itself again and swaps its <main>. Without JavaScript the
// page is the same, only static.
(function () {
  if (!window.EventSource) return;
  var source = new EventSource("/ui/events");
  source.onmessage = function () {
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var main = document.getElementById("main");
        if (next && main) main.replaceWith(next);
      });
  };
})();
