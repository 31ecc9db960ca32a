// The inbox pages' one script: live updates from /_inbox/events (server-sent
// events) and the email frame's height. Everything a sender wrote (scope
// names, subjects, addresses, links) goes in with textContent or as an
// attribute value, never parsed as HTML.
"use strict";

(function () {
  const status = document.getElementById("live-status");

  function cell(row, text, label, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (label) {
      td.dataset.label = label; // the phone layout's line label (inbox.css)
    }
    if (className) {
      td.className = className;
    }
    row.appendChild(td);
    return td;
  }

  function link(href, text) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  function when(iso) {
    const time = document.createElement("time");
    time.dateTime = iso;
    time.textContent = iso.slice(0, 19).replace("T", " ");
    return time;
  }

  function updated() {
    status.textContent = "Live: updated " + new Date().toLocaleTimeString() + ".";
  }

  function listen(url, name, render) {
    if (!window.EventSource || !status) {
      return;
    }
    const events = new EventSource(url);
    events.addEventListener(name, function (event) {
      render(JSON.parse(event.data));
      updated();
    });
    events.addEventListener("error", function () {
      status.textContent = "Reconnecting to the live updates…";
    });
  }

  // Recent scopes (/_inbox/).
  const scopes = document.getElementById("scopes");
  if (scopes) {
    const prefix = scopes.dataset.uiPrefix;
    listen(scopes.dataset.events, "scopes", function (data) {
      const rows = data.scopes.map(function (s) {
        const row = document.createElement("tr");
        cell(row, "").appendChild(link(prefix + encodeURIComponent(s.scope), s.scope));
        cell(row, String(s.messages), "Messages");
        cell(row, s.last_subject || "(no subject)", "Latest subject");
        cell(row, "", "Latest at (UTC)").appendChild(when(s.last_received_at));
        return row;
      });
      if (!rows.length) {
        // The last scope was deleted or pruned: the same line the server renders.
        const row = document.createElement("tr");
        row.className = "empty";
        cell(row, scopes.dataset.empty).colSpan = 4;
        rows.push(row);
      }
      scopes.tBodies[0].replaceChildren.apply(scopes.tBodies[0], rows);
    });
  }

  // One scope's messages (/_inbox/ui/scopes/SCOPE).
  const list = document.getElementById("messages");
  if (list) {
    const prefix = list.dataset.uiPrefix;
    listen(list.dataset.events, "messages", function (data) {
      const resent = {};
      data.duplicates.forEach(function (group) {
        group.slice(1).forEach(function (id) { resent[id] = group[0]; });
      });
      const rows = data.messages.map(function (m) {
        const row = document.createElement("tr");
        if (resent[m.id]) {
          row.className = "resent";
        }
        cell(row, String(m.id), "#", "id");
        cell(row, "", "Received (UTC)", "when").appendChild(when(m.received_at));
        cell(row, m.to.join(", "), "To", "to");
        const subject = cell(row, "", "Subject", "subject");
        subject.appendChild(link(prefix + m.id, m.subject || "(no subject)"));
        if (resent[m.id]) {
          const badge = document.createElement("span");
          badge.className = "badge warn";
          badge.textContent = "re-send of #" + resent[m.id] + " (same Message-ID)";
          subject.append(" ", badge);
        }
        cell(row, (m.size / 1024).toFixed(1) + " KB", "Size", "size");
        return row;
      });
      if (!rows.length) {
        const row = document.createElement("tr");
        row.className = "empty";
        cell(row, "No messages in this scope.").colSpan = 5;
        rows.push(row);
      }
      const body = list.tBodies[0];
      body.replaceChildren.apply(body, rows);
      list.caption.textContent = data.messages.length + " message" +
        (data.messages.length === 1 ? "" : "s") + ", newest first" +
        (data.more ? " (more are stored: narrow the filter)" : "");
    });
  }

  // One message (/_inbox/ui/scopes/SCOPE/messages/ID): its link states, or that it is gone.
  if (status && status.dataset.events) {
    const labels = {
      would_redeem: "would redeem", used: "used", superseded: "superseded by a newer link",
      expired: "expired", invalid: "not a valid authsvc link",
    };
    listen(status.dataset.events, "message", function (data) {
      if (!data.message) {
        document.body.classList.add("gone");
        status.textContent = "This message was deleted.";
        return;
      }
      data.message.link_states.forEach(function (state) {
        document.querySelectorAll("ul.links li").forEach(function (item) {
          const badge = item.querySelector(".badge");
          if (item.dataset.url === state.url && badge) {
            badge.className = "badge state-" + state.state;
            badge.dataset.state = state.state;
            badge.textContent = labels[state.state] || state.state;
          }
        });
      });
    });
  }

  // The email's frame grows to its content's height: no scrollbar inside the page.
  const frame = document.querySelector("iframe.email");
  if (frame) {
    const fit = function () {
      const inner = frame.contentDocument && frame.contentDocument.documentElement;
      if (inner) {
        // Collapsed first, or a frame that was taller (a wider preview) would measure itself.
        const border = frame.offsetHeight - frame.clientHeight; // box-sizing: border-box
        frame.style.height = "0px";
        frame.style.height = inner.scrollHeight + border + "px";
      }
    };
    frame.addEventListener("load", function () {
      fit();
      if (window.ResizeObserver && frame.contentDocument) {
        new ResizeObserver(fit).observe(frame.contentDocument.documentElement);
      }
    });
    document.querySelectorAll("input[name=width]").forEach(function (radio) {
      radio.addEventListener("change", fit);
    });
    fit();
  }
})();
