// The taskstore dashboard's one script: live updates over server-sent
// events (rows change in place, new tasks appear on the first page; pages
// without rows, such as the overview, are read again when the tenant's
// tasks change and every few seconds), a pause button, and plain polling
// when the stream cannot be kept. Loaded
// from /assets (the Content-Security-Policy allows no inline script);
// every page works without it.
(function () {
  'use strict';
  var state = document.getElementById('live-state');
  var toggle = document.getElementById('live-toggle');
  var table = document.getElementById('tasks');
  var details = document.getElementById('task');
  var region = document.getElementById('live-region');
  var source = table || details || region;
  if (!state || !source || !source.dataset.events || !window.EventSource) {
    return;
  }
  var events = null;
  var paused = false;
  var pollTimer = null;
  var failures = 0;
  var POLL_MS = 5000;
  // A region is read again at most once a second after changes, and every
  // ten seconds anyway (workers and slots change without a task changing).
  var REGION_AFTER_MS = 1000;
  var REGION_EVERY_MS = 10000;
  var regionTimer = null;

  function refreshSoon() {
    if (regionTimer) { return; }
    regionTimer = window.setTimeout(function () { regionTimer = null; refresh(); }, REGION_AFTER_MS);
  }

  function setState(name, text) {
    state.dataset.state = name;
    state.textContent = text || name;
  }

  function element(html) {
    var template = document.createElement('template');
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function replaceRow(existing, html) {
    var row = element(html);
    var box = existing.querySelector('input[type="checkbox"]');
    var newBox = row.querySelector('input[type="checkbox"]');
    if (box && newBox) { newBox.checked = box.checked; }
    if (document.activeElement && existing.contains(document.activeElement)) {
      // Keep keyboard focus where it was: update the cells, not the row.
      existing.dataset.status = row.dataset.status;
      existing.querySelector('td.status').innerHTML = row.querySelector('td.status').innerHTML;
      existing.querySelector('td.message').textContent = row.querySelector('td.message').textContent;
      return;
    }
    existing.replaceWith(row);
  }

  function apply(data, created) {
    if (region) { refreshSoon(); return; }
    var task = JSON.parse(data);
    if (table) {
      var existing = document.getElementById('task-' + task.id);
      if (existing) {
        replaceRow(existing, task.row);
      } else if (created && table.dataset.firstPage === 'true') {
        var body = table.tBodies[0];
        body.insertBefore(element(task.row), body.firstElementChild);
        var empty = document.querySelector('p.empty');
        if (empty) { empty.remove(); }
      }
    }
    if (details && details.dataset.taskId === task.id) {
      var before = details.querySelector('[data-field="status"]').textContent;
      details.querySelector('[data-field="status"]').innerHTML = task.statusHtml;
      details.querySelector('[data-field="message"]').textContent = task.message || '—';
      if (before !== details.querySelector('[data-field="status"]').textContent) {
        refresh();
      }
    }
  }

  // Reads the page again and puts in what can change: the rows, or the
  // task's state, questions and result.
  function refresh() {
    return fetch(window.location.href, { credentials: 'same-origin' }).then(function (response) {
      if (response.redirected || response.status === 401) { window.location.reload(); return; }
      return response.text().then(function (html) {
        var fresh = new DOMParser().parseFromString(html, 'text/html');
        var ids = table ? ['tasks'] : details ? ['task', 'questions', 'result', 'attempts-section'] : ['live-region'];
        ids.forEach(function (id) {
          var now = document.getElementById(id);
          var then = fresh.getElementById(id);
          if (!now || !then) { return; }
          if (now.contains(document.activeElement) && id === 'questions') { return; }
          // Keyboard focus inside the region stays where it is: later.
          if (id === 'live-region' && now.contains(document.activeElement)) { refreshSoon(); return; }
          if (id === 'tasks') { now.tBodies[0].replaceWith(then.tBodies[0]); } else { now.replaceWith(then); }
        });
        table = document.getElementById('tasks');
        details = document.getElementById('task');
        region = document.getElementById('live-region');
      });
    }).catch(function () { setState('offline'); });
  }

  function connect() {
    events = new EventSource(source.dataset.events);
    events.addEventListener('ready', function () { failures = 0; stopPolling(); setState('live'); });
    events.addEventListener('task', function (e) { apply(e.data, false); });
    events.addEventListener('created', function (e) { apply(e.data, true); });
    events.addEventListener('resync', function () { refresh(); });
    events.addEventListener('logout', function () { window.location.reload(); });
    events.onerror = function () {
      failures += 1;
      if (events.readyState === EventSource.CLOSED || failures >= 3) {
        events.close();
        events = null;
        startPolling();
      } else {
        setState('offline', 'reconnecting');
      }
    };
  }

  function startPolling() {
    if (pollTimer || paused) { return; }
    setState('polling');
    pollTimer = window.setInterval(function () {
      refresh();
      // Try the stream again now and then.
      if (!events && failures < 10) { connect(); }
    }, POLL_MS);
  }

  function stopPolling() {
    if (pollTimer) { window.clearInterval(pollTimer); pollTimer = null; }
  }

  toggle.hidden = false;
  toggle.setAttribute('aria-pressed', 'false');
  toggle.addEventListener('click', function () {
    paused = !paused;
    toggle.setAttribute('aria-pressed', paused ? 'true' : 'false');
    toggle.textContent = paused ? 'Resume live updates' : 'Pause live updates';
    if (paused) {
      if (events) { events.close(); events = null; }
      stopPolling();
      setState('paused');
    } else {
      failures = 0;
      refresh().then(connect);
    }
  });
  if (region) {
    window.setInterval(function () { if (events && !paused) { refresh(); } }, REGION_EVERY_MS);
  }
  setState('offline', 'connecting');
  connect();
})();
