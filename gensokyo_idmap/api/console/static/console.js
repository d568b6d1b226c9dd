// gensokyo-idmap console: live figures on the overview, the log tail, local times.
// Served as a file (the Content-Security-Policy allows no inline script); no build step.
// It writes no words of its own: "yes" and "no" come from the page (data-yes, data-no on
// the overview, in the page's language), and a moment is shown in one language-neutral
// format, 2024-05-01 11:04:05 UTC+08:00 (the server writes the same in UTC).
"use strict";

function pick(data, path) {
  return path.split(".").reduce(function (value, part) {
    return value === null || value === undefined ? undefined : value[part];
  }, data);
}

function two(n) { return (n < 10 ? "0" : "") + n; }

// A Date in the viewer's local time: YYYY-MM-DD HH:MM:SS UTC+hh:mm.
function localText(date) {
  var offset = -date.getTimezoneOffset();
  var sign = offset < 0 ? "-" : "+";
  offset = Math.abs(offset);
  return date.getFullYear() + "-" + two(date.getMonth() + 1) + "-" + two(date.getDate()) +
    " " + two(date.getHours()) + ":" + two(date.getMinutes()) + ":" + two(date.getSeconds()) +
    " UTC" + sign + two(Math.floor(offset / 60)) + ":" + two(offset % 60);
}

// <time datetime=ISO> in local time; its text stays the server's UTC when it cannot be read.
function showLocal(el) {
  var date = new Date(el.getAttribute("datetime"));
  if (!isNaN(date.getTime())) {
    el.textContent = localText(date);
    el.setAttribute("title", el.getAttribute("datetime"));
  }
}

// A live moment (Unix seconds from overview.json) into the element's <time>, made if missing.
function setLiveTime(el, seconds) {
  var n = Number(seconds);
  if (seconds === null || seconds === undefined || seconds === "" || isNaN(n)) {
    el.textContent = "\u2014";
    return;
  }
  var time = el.querySelector("time") || document.createElement("time");
  time.setAttribute("datetime", new Date(n * 1000).toISOString().replace(/\.\d+Z$/, "Z"));
  showLocal(time);
  if (time.parentNode !== el) { el.textContent = ""; el.appendChild(time); }
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

function showValue(value, words) {
  if (value === null || value === undefined) { return "—"; }
  if (value === true) { return words.yes; }
  if (value === false) { return words.no; }
  if (typeof value === "number" && !Number.isInteger(value)) { return value.toFixed(2); }
  return String(value);
}

function localTimes(root) {
  root.querySelectorAll("time[datetime]").forEach(showLocal);
}

function refreshOverview(root) {
  var url = root.getAttribute("data-refresh");
  fetch(url, { credentials: "same-origin", cache: "no-store" })
    .then(function (response) { return response.ok ? response.json() : null; })
    .then(function (data) {
      if (!data) { return; }
      var words = { yes: root.getAttribute("data-yes") || "yes",
                    no: root.getAttribute("data-no") || "no" };
      root.querySelectorAll("[data-live]").forEach(function (el) {
        var value = pick(data, el.getAttribute("data-live"));
        if (value !== undefined) { el.textContent = showValue(value, words); }
      });
      root.querySelectorAll("[data-live-bytes]").forEach(function (el) {
        var value = pick(data, el.getAttribute("data-live-bytes"));
        if (value !== undefined && value !== null) { el.textContent = humanSize(value); }
      });
      root.querySelectorAll("[data-live-time]").forEach(function (el) {
        setLiveTime(el, pick(data, el.getAttribute("data-live-time")));
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
