// Hermes web panel: streaming chat, the live Learned Facts sidebar, ratings, the memory gauge.
// Everything works without this file; it only makes it live.
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf"]') || {}).content || "";

  function post(url, body, accept) {
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "X-CSRF-Token": csrf, "Accept": accept,
                 "Content-Type": "application/x-www-form-urlencoded" }
    });
  }

  function fromHTML(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // Server-sent events from a fetch body: calls onEvent(name, data) per event.
  async function readEvents(response, onEvent) {
    var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
    for (;;) {
      var part = await reader.read();
      if (part.done) break;
      buffer += decoder.decode(part.value, { stream: true });
      var at;
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        var block = buffer.slice(0, at); buffer = buffer.slice(at + 2);
        var name = "message", data = "";
        block.split("\n").forEach(function (line) {
          if (line.indexOf("event: ") === 0) name = line.slice(7);
          else if (line.indexOf("data: ") === 0) data += line.slice(6);
        });
        if (data) onEvent(name, JSON.parse(data));
      }
    }
  }

  // ---- chat: send and stream the reply
  var form = document.getElementById("send");
  if (form) {
    var box = document.getElementById("text"), messages = document.getElementById("messages");
    // The input stays at the bottom of the screen: what scrolls into view stops above it
    var fitInput = function () {
      document.documentElement.style.scrollPaddingBottom = (form.offsetHeight + 8) + "px";
    };
    fitInput(); window.addEventListener("resize", fitInput);
    // A conversation opens at its newest message
    // and stays there while the page settles (late styles, the sidebars filled in, the input's
    // size), until the person scrolls, touches, clicks or types: the usual "stick to the end".
    if (!location.hash && messages.querySelector(".msg")) {
      var end = document.getElementById("end"), settling = true;
      var toEnd = function () { if (settling) end.scrollIntoView({ block: "end" }); };
      var settled = function () { settling = false; };
      ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (name) {
        window.addEventListener(name, settled, { once: true, passive: true });
      });
      toEnd();
      window.addEventListener("load", toEnd);
      if (window.ResizeObserver) {
        var sizes = new ResizeObserver(function () { fitInput(); toEnd(); });
        sizes.observe(document.body); sizes.observe(form);
      }
    }
    box.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });
    var sendButton = document.getElementById("sendbutton"), stopButton = document.getElementById("stop");
    function busy(on) {                   // while a reply streams, Send becomes Stop
      if (on) form.dataset.busy = "1"; else delete form.dataset.busy;
      sendButton.hidden = on; stopButton.hidden = !on;
      if (on) stopButton.focus();
    }
    function stop() {
      if (!form.dataset.busy) return;
      post("/chat/stop", new URLSearchParams({ session: form.elements.session.value }), "application/json");
    }
    stopButton.addEventListener("click", stop);
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") stop(); });
    form.addEventListener("submit", async function (e) {
      e.preventDefault();
      var text = box.value.trim();
      if (!text || form.dataset.busy) return;
      busy(true);
      var empty = document.getElementById("empty"); if (empty) empty.remove();
      var mine = document.createElement("article"); mine.className = "msg user";
      mine.innerHTML = '<div class="text"></div>'; mine.firstChild.textContent = text;
      var reply = document.createElement("article"); reply.className = "msg assistant streaming";
      reply.innerHTML = '<div class="text md"></div>';
      messages.append(mine, reply);
      var out = reply.firstChild, body = new URLSearchParams(new FormData(form)), chunks = 0, tail = null;
      box.value = "";
      try {
        var response = await post(form.action, body, "text/event-stream");
        if (!response.ok) {
          var problem = await response.json().catch(function () { return {}; });
          out.textContent = problem.error || ("Error " + response.status); reply.classList.add("error");
          return;
        }
        await readEvents(response, function (name, data) {
          if (name === "start") {
            form.elements.session.value = data.session_id;
            if (data.item_html) {         // a new conversation: on top of the list at once
              var chats = document.getElementById("chats"), none = document.getElementById("nochats");
              if (none) none.remove();
              chats.querySelectorAll("[aria-current]").forEach(function (a) { a.removeAttribute("aria-current"); });
              chats.prepend(fromHTML(data.item_html));
            }
            history.replaceState(null, "", "/chat?session=" + data.session_id);
          } else if (name === "chunk") {
            // Sanitised HTML of the reply so far (rendered on the server) now and then; the
            // text that came since, as text, until the next
            if (data.html !== undefined) { out.innerHTML = data.html; tail = null; }
            else {
              if (!tail) { tail = document.createElement("span"); tail.className = "tail"; out.append(tail); }
              tail.textContent += data.text;
            }
            messages.dataset.chunks = ++chunks;   // how many pieces the last reply came in
            reply.scrollIntoView({ block: "end" });
          } else if (name === "done") {
            if (data.html) {
              var done = fromHTML(data.html); reply.replaceWith(done); reply = done;
              if (data.message_id) showLearned(data.message_id);
            }
            else reply.classList.remove("streaming");
            if (data.error) {
              var err = document.createElement("p"); err.className = "error"; err.textContent = data.error;
              reply.append(err);
            }
            // The finished reply is laid out anew (the text that came last as plain text, now
            // as paragraphs, and its receipt below): the end of its text stays above the input
            (reply.querySelector(".text") || reply).scrollIntoView({ block: "end" });
          }
        });
      } catch (err) {
        out.textContent += "\n(connection lost: " + err + ")";
      } finally {
        reply.classList.remove("streaming"); busy(false); box.focus();
      }
    });
  }

  // ---- a receipt's one-tap actions on one fact: rate it, "wrong: forget it", undo learning
  document.addEventListener("submit", async function (e) {
    var f = e.target;
    if (!f.classList || !f.classList.contains("fact-act")) return;
    e.preventDefault();
    var body = new URLSearchParams(new FormData(f));
    if (e.submitter && e.submitter.name) body.set(e.submitter.name, e.submitter.value);
    var response = await post(f.action, body, "application/json");
    var data = await response.json();
    var item = f.closest("li");
    if (!response.ok) { alert(data.error || "That failed"); return; }
    document.querySelectorAll('[data-fact-id="' + data.id + '"] .trust, #fact-' + data.id + " .trust")
      .forEach(function (el) { el.textContent = Number(data.trust).toFixed(2); });
    if (data.status !== "active") {
      document.querySelectorAll('li[data-fact-id="' + data.id + '"]').forEach(function (li) {
        li.className = data.status;
        var acts = li.querySelector(".acts"), done = document.createElement("em");
        done.textContent = f.action.endsWith("/forget") && li.closest(".learned-here") ? "undone" : data.status;
        acts.replaceChildren(done);
      });
    }
    item.dataset.done = data.message || "";
  });

  // ---- ratings: 👍/👎 rate the facts shown for a reply
  document.addEventListener("submit", async function (e) {
    var f = e.target;
    if (!f.classList || !f.classList.contains("rate")) return;
    e.preventDefault();
    var body = new URLSearchParams(new FormData(f));
    body.set("rating", e.submitter ? e.submitter.value : "up");
    var response = await post(f.action, body, "application/json");
    var data = await response.json();
    if (!response.ok) { alert(data.error || "Rating failed"); return; }
    f.querySelectorAll("button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.value === data.rating));
    });
    var note = f.querySelector(".rate-note");
    if (note) note.textContent = data.note || "";
    Object.keys(data.trust).forEach(function (id) {
      var t = Number(data.trust[id]).toFixed(2);
      document.querySelectorAll('[data-fact-id="' + id + '"] .trust, #fact-' + id + " .trust")
        .forEach(function (el) { el.textContent = t; });
      var item = document.getElementById("fact-" + id); if (item) item.dataset.trust = t;
    });
  });

  // Under the reply a fact was learned from: its receipt counts it, with Undo. Kept until that
  // reply is on the page (its own stream may end after the fact's event came).
  var learnedFor = {};
  function showLearned(replyId) {
    var here = document.querySelector("#m" + replyId + " .learned-here");
    if (!here) return;
    (learnedFor[replyId] || []).forEach(function (data) {
      if (!here.querySelector('[data-fact-id="' + data.fact_id + '"]')) here.append(fromHTML(data.learned_html));
    });
    here.closest(".receipt").querySelector(".learned-count").textContent = here.children.length;
  }

  // ---- Learned Facts: live from /events
  var list = document.getElementById("facts");
  if (list && window.EventSource) {
    var source = new EventSource("/events");
    source.addEventListener("fact", function (e) {
      var data = JSON.parse(e.data), none = document.getElementById("nofacts");
      if (none) none.remove();
      if (data.old_id) {
        var old = document.getElementById("fact-" + data.old_id);
        if (old && data.old_html) old.replaceWith(fromHTML(data.old_html));
      }
      var existing = document.getElementById("fact-" + data.fact_id);
      if (existing) existing.remove();
      var item = fromHTML(data.html);
      item.dataset.committedAt = data.committed_at;
      item.dataset.shownAt = Date.now();
      list.prepend(item);
      if (data.learned_html) {
        learnedFor[data.reply_id] = (learnedFor[data.reply_id] || []).concat([data]);
        showLearned(data.reply_id);
      }
    });
    source.addEventListener("title", function (e) {   // a new conversation's title
      var data = JSON.parse(e.data);
      var link = document.querySelector('#chats [data-session-id="' + data.session_id + '"] a');
      if (link) link.textContent = data.title;
    });
    source.addEventListener("close", function () { source.close(); });
  }

  // ---- basic memory: a live estimate of the whole-block editor's size
  var block = document.getElementById("block"), usage = document.getElementById("usage");
  if (block && usage) {
    var meter = document.getElementById("gauge"), limit = Number(block.dataset.limit);
    block.addEventListener("input", function () {
      var lines = block.value.split("\n").map(function (l) { return l.replace(/\s+/g, " ").trim(); })
        .filter(Boolean);
      var chars = lines.reduce(function (n, l, i) { return n + ("[" + (i + 1) + "] ").length + l.length; }, 0)
        + Math.max(0, lines.length - 1);
      usage.textContent = "≈ " + chars.toLocaleString("en") + " / " + limit.toLocaleString("en") +
        " chars" + (chars > limit ? " (over the cap: saving will be refused)" : "");
      meter.value = chars;
    });
  }
})();
