// The scope list, kept current from /_inbox/events (server-sent events).
// Rows are built with textContent only: scope names and subjects come from
// whoever sent the mail and are never parsed as HTML.
"use strict";

(function () {
  const table = document.getElementById("scopes");
  const status = document.getElementById("live-status");
  if (!table || !window.EventSource) {
    return;
  }
  const prefix = table.dataset.uiPrefix;
  const body = table.tBodies[0];

  function cell(row, text, label) {
    const td = document.createElement("td");
    td.textContent = text;
    if (label) {
      td.dataset.label = label; // the phone layout's line label (inbox.css)
    }
    row.appendChild(td);
    return td;
  }

  function render(scopes) {
    const rows = scopes.map(function (s) {
      const row = document.createElement("tr");
      const link = document.createElement("a");
      link.href = prefix + encodeURIComponent(s.scope);
      link.textContent = s.scope;
      cell(row, "").appendChild(link);
      cell(row, String(s.messages), "Messages");
      cell(row, s.last_subject || "(no subject)", "Latest subject");
      const when = document.createElement("time");
      when.dateTime = s.last_received_at;
      when.textContent = s.last_received_at.slice(0, 19).replace("T", " ");
      cell(row, "", "Latest at (UTC)").appendChild(when);
      return row;
    });
    if (rows.length) {
      body.replaceChildren.apply(body, rows);
    }
  }

  const events = new EventSource(table.dataset.events || "/_inbox/events");
  events.addEventListener("scopes", function (event) {
    render(JSON.parse(event.data).scopes);
    status.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
  });
  events.addEventListener("error", function () {
    status.textContent = "Reconnecting to the live updates…";
  });
})();
