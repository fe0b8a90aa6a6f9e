/* duetime dashboard: live refresh with a pause toggle, task selection that survives refreshes,
   and the confirmation and edit panels. Plain script (no build), loaded after htmx; every page
   works without it, only without live refresh.

   - Live refresh: every <body data-refresh-seconds> seconds the element #live is re-fetched in
     place (htmx, hx-trigger="refresh"), unless paused or the tab is hidden. #live-toggle pauses
     and resumes; the state is kept in the page (it lasts until the page is left).
   - Selection: the ticked task ids are remembered; after a refresh the boxes are ticked again,
     and a ticked task no longer listed stays selected (a hidden field of the bulk form).
   - Panels (#confirm, #edit) sit outside #live, so a refresh never closes them; a [data-dismiss]
     link or Escape closes one and gives focus back to what opened it. */
(function () {
  "use strict";

  var paused = false;
  var updatedAt = new Date();
  var picked = new Set();
  var opener = null;

  function $(id) { return document.getElementById(id); }

  function boxes() {
    return Array.prototype.slice.call(
      document.querySelectorAll("input[type=checkbox][name=pick][form=bulk]"));
  }

  function seconds() {
    var n = Number(document.body.dataset.refreshSeconds);
    return n > 0 ? n : 10;
  }

  function clock(d) {
    return d.toTimeString().slice(0, 8);
  }

  function showState() {
    var button = $("live-toggle");
    var state = $("live-state");
    if (!button || !state || !$("live")) { return; }
    button.hidden = false;
    button.setAttribute("aria-pressed", paused ? "true" : "false");
    button.textContent = paused ? "Resume live refresh" : "Pause live refresh";
    state.textContent = paused
      ? "Paused · shown as of " + clock(updatedAt)
      : "Live · every " + seconds() + " s · updated " + clock(updatedAt);
    state.classList.toggle("paused", paused);
  }

  function tick() {
    window.setTimeout(function () {
      var live = $("live");
      if (live && !paused && !document.hidden && window.htmx) {
        window.htmx.trigger(live, "refresh");
      }
      tick();
    }, seconds() * 1000);
  }

  function syncSelection() {
    var shown = new Set();
    boxes().forEach(function (box) {
      shown.add(box.value);
      box.checked = picked.has(box.value);
    });
    var kept = $("picked-kept");
    if (kept) {
      kept.textContent = "";
      picked.forEach(function (id) {
        if (shown.has(id)) { return; }
        var input = document.createElement("input");
        input.type = "hidden";
        input.name = "pick";
        input.value = id;
        kept.appendChild(input);
      });
    }
    var all = $("pick-all");
    if (all) {
      var list = boxes();
      all.hidden = list.length === 0;
      all.checked = list.length > 0 && list.every(function (b) { return b.checked; });
      all.indeterminate = !all.checked && list.some(function (b) { return b.checked; });
    }
    var count = $("picked-count");
    if (count) {
      var away = picked.size - boxes().filter(function (b) { return b.checked; }).length;
      var text = picked.size === 0
        ? "Tick tasks to act on them"
        : picked.size + " selected" + (away > 0 ? " (" + away + " no longer listed here)" : "");
      if (count.textContent !== text) { count.textContent = text; }  // announced when it changes
    }
  }

  function closePanel(panel) {
    var empty = document.createElement("div");
    empty.id = panel.id;
    panel.replaceWith(empty);
    if (opener && document.body.contains(opener)) { opener.focus(); }
    opener = null;
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.id === "pick-all") {
      boxes().forEach(function (box) {
        if (target.checked) { picked.add(box.value); } else { picked.delete(box.value); }
      });
      syncSelection();
    } else if (target.name === "pick" && target.getAttribute("form") === "bulk") {
      if (target.checked) { picked.add(target.value); } else { picked.delete(target.value); }
      syncSelection();
    }
  });

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.id === "live-toggle") {
      paused = !paused;
      showState();
      return;
    }
    var dismiss = target.closest ? target.closest("[data-dismiss]") : null;
    var panel = dismiss ? dismiss.closest("#confirm, #edit") : null;
    if (panel) {
      event.preventDefault();
      closePanel(panel);
      return;
    }
    if (target.closest && target.closest("[hx-target='#confirm'], [hx-target='#edit'], #bulk")) {
      opener = target;
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") { return; }
    var panel = document.activeElement && document.activeElement.closest
      ? document.activeElement.closest("#confirm, #edit") : null;
    if (panel && panel.children.length) { closePanel(panel); }
  });

  // Ticks are put back as soon as the new list is in the page, not after it settled: no frame
  // shows a ticked task unticked.
  document.addEventListener("htmx:afterSwap", syncSelection);

  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.elt;
    var live = $("live");
    if (live && (target === live || (target && target.id === "live"))) {
      updatedAt = new Date();
    }
    syncSelection();
    showState();
    ["confirm", "edit"].forEach(function (id) {
      var panel = $(id);
      if (panel && target && (target === panel || panel.contains(target)) && panel.children.length) {
        var first = panel.querySelector("[autofocus], [aria-invalid=true], input:not([type=hidden]), button, a");
        if (first) { first.focus(); }
      }
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    boxes().forEach(function (box) { if (box.checked) { picked.add(box.value); } });
    syncSelection();
    showState();
    tick();
  });
})();
