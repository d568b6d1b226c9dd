// gensokyo-idmap console: live figures on the overview, the log tail, local times.
// Served as a file (the Content-Security-Policy allows no inline script); no build step.
"use strict";

function pick(data, path) {
  return path.split(".").reduce(function (value, part) {
    return value === null || value === undefined ? undefined : value[part];
  }, data);
}

function showTime(seconds) {
  var n = Number(seconds);
  if (!seconds || isNaN(n)) { return ""; }
  return new Date(n * 1000).toLocaleString();
}

function humanSize(count) {
  var size = Number(count);
  var units = ["B", "KiB", "MiB", "GiB"];
  for (var i = 0; i < units.length; i++) {
    if (size < 1024 || i === units.length - 1) {
      return i === 0 ? size.toFixed(0) + " B" : size.toFixed(1) + " " + units[i];
    }
    size /= 1024;
  }
  return String(count);
}

function showValue(value) {
  if (value === null || value === undefined) { return "—"; }
  if (value === true) { return "yes"; }
  if (value === false) { return "no"; }
  if (typeof value === "number" && !Number.isInteger(value)) { return value.toFixed(2); }
  return String(value);
}

function localTimes(root) {
  root.querySelectorAll("[data-time]").forEach(function (el) {
    var shown = showTime(el.getAttribute("data-time"));
    if (shown) { el.textContent = shown; }
  });
  root.querySelectorAll("[data-live-time]").forEach(function (el) {
    el.textContent = showTime(el.textContent);
  });
}

function refreshOverview(root) {
  var url = root.getAttribute("data-refresh");
  fetch(url, { credentials: "same-origin", cache: "no-store" })
    .then(function (response) { return response.ok ? response.json() : null; })
    .then(function (data) {
      if (!data) { return; }
      root.querySelectorAll("[data-live]").forEach(function (el) {
        var value = pick(data, el.getAttribute("data-live"));
        if (value !== undefined) { el.textContent = showValue(value); }
      });
      root.querySelectorAll("[data-live-bytes]").forEach(function (el) {
        var value = pick(data, el.getAttribute("data-live-bytes"));
        if (value !== undefined && value !== null) { el.textContent = humanSize(value); }
      });
      root.querySelectorAll("[data-live-time]").forEach(function (el) {
        el.textContent = showTime(pick(data, el.getAttribute("data-live-time")));
      });
      root.querySelectorAll("[data-live-lines]").forEach(function (el) {
        var lines = pick(data, el.getAttribute("data-live-lines")) || [];
        el.textContent = lines.join("\n");
      });
      document.body.setAttribute("data-refreshed", String(Date.now()));
    })
    .catch(function () { /* the daemon restarting: the next round tries again */ });
}

function startOverview(root) {
  var chart = document.getElementById("chart");
  setInterval(function () { refreshOverview(root); }, 2000);
  if (chart) {
    setInterval(function () { chart.src = "/ui/chart.svg?at=" + Date.now(); }, 10000);
  }
}

function startTail(pre) {
  var source = new EventSource(pre.getAttribute("data-stream"));
  var kept = 2000;
  source.onmessage = function (message) {
    var line = JSON.parse(message.data);
    var row = document.createElement("span");
    row.className = "line level-" + line.level;
    row.textContent = line.text + "\n";
    var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.appendChild(row);
    while (pre.childNodes.length > kept) { pre.removeChild(pre.firstChild); }
    if (atBottom) { pre.scrollTop = pre.scrollHeight; }
  };
  var level = document.getElementById("level");
  if (level) {
    level.addEventListener("change", function () { level.form.submit(); });
  }
}

document.addEventListener("DOMContentLoaded", function () {
  localTimes(document);
  var overview = document.getElementById("overview");
  if (overview) { startOverview(overview); }
  var tail = document.getElementById("tail");
  if (tail) { startTail(tail); }
});
