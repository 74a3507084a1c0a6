// Edge Translator's page: translates as you type, sentence by sentence from /v1/translate's
// NDJSON stream, and translates documents through /v1/documents. No library, no build step.
// Translations are only ever inserted as text (textContent, text nodes), never as HTML.
"use strict";

(() => {
  /** Below this score (mean log-probability) a translation is doubtful: gui/alignment.py DOUBTFUL_SCORE. */
  const DOUBTFUL_SCORE = -1.0;
  /** Quiet time after the last keystroke before the text is sent. */
  const DEBOUNCE_MS = 250;
  const POLL_MS = 800;
  const POLL_FAILURES = 5;
  const KEY_STORE = "edge-translator.api-key";
  const TARGET_STORE = "edge-translator.target";
  const FIRST_SENTENCE = "edge-translator:first-sentence";

  const $ = (id) => document.getElementById(id);
  const ui = {
    source: $("source"), backdrop: $("backdrop"), editor: $("editor"), output: $("output"),
    count: $("count"), status: $("status"), copy: $("copy"), target: $("target"), targetLabel: $("target-label"),
    keyForm: $("key-form"), keyInput: $("key-input"), keyMessage: $("key-message"), keyButton: $("key-button"),
    keyForget: $("key-forget"), files: $("files"), drop: $("drop"), formats: $("formats"), jobs: $("jobs"),
    documentsOff: $("documents-off"), entries: $("entries"),
  };
  /** A lone word or a term of up to three words (what the dictionary answers; the server's rule). */
  const TERM = /^\s*[\p{L}\p{N}][\p{L}\p{N}_'’-]*(?:[ \t]+[\p{L}\p{N}][\p{L}\p{N}_'’-]*){0,2}\s*$/u;

  const settings = { charLimit: -1, keyRequired: false, filesTranslation: true, formats: [] };
  let target = "";
  let timer = 0;
  let controller = null;
  let inputAt = 0;
  /** The translation on screen: the source text it is for, and its sentences
   *  ({start, end} in UTF-16 units of that text, out: its node in the output, src: its node in the backdrop). */
  let shown = { text: "", sentences: [] };
  let hovered = -1;
  let caret = -1;
  let active = -1;

  // -- small helpers ---------------------------------------------------------------------------
  function storedKey() {
    try { return localStorage.getItem(KEY_STORE) || ""; } catch { return ""; }
  }

  function store(name, value) {
    try {
      if (value) localStorage.setItem(name, value); else localStorage.removeItem(name);
    } catch { /* storage off (private mode): the key lasts as long as the page */ }
  }

  let sessionKey = "";
  function apiKey() { return storedKey() || sessionKey; }

  function authHeaders(extra) {
    const headers = new Headers(extra || {});
    const key = apiKey();
    if (key) headers.set("Authorization", "Bearer " + key);
    return headers;
  }

  async function errorText(response) {
    try {
      const body = await response.json();
      if (body && (body.error || body.message)) return String(body.error || body.message);
    } catch { /* not JSON */ }
    return `the server answered ${response.status} ${response.statusText}`.trim();
  }

  function say(message, isError) {
    ui.status.textContent = message || "";
    ui.status.classList.toggle("error", Boolean(isError));
  }

  /** Code points in a string (the server counts and measures spans in code points). */
  function codePoints(text) {
    const pairs = text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
    return text.length - (pairs ? pairs.length : 0);
  }

  /** A function from a code-point offset in ``text`` to its UTF-16 offset. */
  function offsets(text) {
    if (!/[\uD800-\uDFFF]/.test(text)) return (n) => n;
    const table = [0];
    let unit = 0;
    for (const ch of text) { unit += ch.length; table.push(unit); }
    return (n) => table[Math.min(n, table.length - 1)];
  }

  // -- the key ---------------------------------------------------------------------------------
  function askForKey(message) {
    ui.keyForm.hidden = false;
    ui.keyButton.hidden = false;
    ui.keyMessage.textContent = message || "Ask the server's owner for one. It is kept in this browser only.";
    ui.keyInput.value = apiKey();
    ui.keyForget.hidden = !apiKey();
    ui.keyInput.focus();
  }

  ui.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = ui.keyInput.value.trim();
    if (!key) return;
    sessionKey = key;
    store(KEY_STORE, key);
    ui.keyForm.hidden = true;
    say("Key saved in this browser.");
    ui.source.focus();
    if (ui.source.value.trim()) translateNow();
  });

  ui.keyForget.addEventListener("click", () => {
    sessionKey = "";
    store(KEY_STORE, "");
    ui.keyInput.value = "";
    ui.keyForget.hidden = true;
    say("The key is forgotten.");
    ui.keyInput.focus();
  });

  ui.keyButton.addEventListener("click", () => {
    if (ui.keyForm.hidden) askForKey(); else ui.keyForm.hidden = true;
  });

  // -- the source: count, size, backdrop -------------------------------------------------------
  function overLimit() {
    return settings.charLimit > 0 && codePoints(ui.source.value) > settings.charLimit;
  }

  function updateCount() {
    const n = codePoints(ui.source.value);
    const limit = settings.charLimit;
    ui.count.textContent = limit > 0 ? `${n.toLocaleString()} / ${limit.toLocaleString()} characters`
      : `${n.toLocaleString()} characters`;
    ui.count.classList.toggle("over", limit > 0 && n > limit);
  }

  function autosize() {
    const box = ui.source;
    box.style.height = "auto";
    box.style.height = `${box.scrollHeight + box.offsetHeight - box.clientHeight}px`;
  }

  /** The source text again, behind the textarea, with the translated sentences in spans. */
  function renderBackdrop() {
    const text = ui.source.value;
    const parts = [];
    let at = 0;
    if (shown.text === text) {
      shown.sentences.forEach((sentence, i) => {
        if (sentence.start > at) parts.push(document.createTextNode(text.slice(at, sentence.start)));
        const span = document.createElement("span");
        span.className = "sentence" + (sentence.doubtful ? " doubtful" : "");
        span.dataset.i = String(i);
        span.textContent = text.slice(sentence.start, sentence.end);
        sentence.src = span;
        parts.push(span);
        at = Math.max(at, sentence.end);
      });
    }
    parts.push(document.createTextNode(text.slice(at) + "\n"));  // a final line break keeps heights equal
    ui.backdrop.replaceChildren(...parts);
    highlight(true);
  }

  // -- highlighting: pointer over a sentence on either side, or the caret in one ---------------
  function highlight(force) {
    const wanted = hovered >= 0 ? hovered : caret;
    if (wanted === active && !force) return;
    for (const node of document.querySelectorAll(".sentence.active")) node.classList.remove("active");
    active = wanted;
    const sentence = shown.text === ui.source.value ? shown.sentences[active] : undefined;
    if (!sentence) return;
    for (const node of [sentence.out, sentence.src]) if (node) node.classList.add("active");
  }

  function sentenceAt(offset) {
    if (shown.text !== ui.source.value) return -1;
    return shown.sentences.findIndex((s) => s.start <= offset && offset <= s.end);
  }

  function followCaret() {
    caret = document.activeElement === ui.source ? sentenceAt(ui.source.selectionStart) : -1;
    highlight();
  }

  document.addEventListener("selectionchange", followCaret);
  ui.source.addEventListener("blur", followCaret);
  ui.editor.addEventListener("mousemove", (event) => {
    const under = document.elementsFromPoint(event.clientX, event.clientY)
      .find((node) => node.parentNode === ui.backdrop && node.dataset && node.dataset.i);
    hovered = under ? Number(under.dataset.i) : -1;
    highlight();
  });
  ui.editor.addEventListener("mouseleave", () => { hovered = -1; highlight(); });
  ui.output.addEventListener("mouseover", (event) => {
    const node = event.target.closest ? event.target.closest(".sentence") : null;
    hovered = node ? Number(node.dataset.i) : -1;
    highlight();
  });
  ui.output.addEventListener("mouseleave", () => { hovered = -1; highlight(); });

  // -- translating -----------------------------------------------------------------------------
  ui.source.addEventListener("input", (event) => {
    inputAt = event.timeStamp || performance.now();
    if (controller) { controller.abort(); controller = null; }
    autosize();
    updateCount();
    renderBackdrop();
    clearEntries();
    ui.output.classList.add("stale");
    clearTimeout(timer);
    timer = setTimeout(translateNow, DEBOUNCE_MS);
  });

  function clearOutput() {
    clearEntries();
    shown = { text: "", sentences: [] };
    ui.output.replaceChildren();
    ui.output.classList.remove("stale");
    ui.copy.disabled = true;
    renderBackdrop();
  }

  async function translateNow() {
    clearTimeout(timer);
    if (controller) controller.abort();
    controller = null;
    const text = ui.source.value;
    if (!text.trim()) { clearOutput(); say(""); return; }
    if (overLimit()) {
      say(`The text is over this server's limit of ${settings.charLimit.toLocaleString()} characters; shorten it.`,
        true);
      return;
    }
    if (settings.keyRequired && !apiKey()) { askForKey(); return; }
    const ctl = new AbortController();
    controller = ctl;
    const started = inputAt || performance.now();
    inputAt = 0;
    const body = { text, stream: true };
    if (target) body.target = target;
    let fresh = null;  // the sentences of this answer, once the first arrives
    try {
      const response = await fetch("v1/translate", {
        method: "POST", headers: authHeaders({ "Content-Type": "application/json" }), body: JSON.stringify(body),
        signal: ctl.signal,
      });
      if (!response.ok) {
        const message = await errorText(response);
        if (ctl.signal.aborted) return;
        if (response.status === 403) askForKey(message.charAt(0).toUpperCase() + message.slice(1) + ".");
        say(message, true);
        return;
      }
      ui.output.setAttribute("aria-busy", "true");
      const at = offsets(text);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let pending = "";
      let finished = false;
      const handle = (line) => {
        if (!line.trim()) return;
        const item = JSON.parse(line);
        if (item.error) { say(item.error, true); finished = true; return; }
        if (item.done) { finish(fresh, text); finished = true; return; }
        if (fresh === null) {
          fresh = [];
          shown = { text, sentences: fresh };
          ui.output.replaceChildren();
          ui.output.classList.remove("stale");
          say("");
          requestAnimationFrame(() => {
            performance.clearMeasures(FIRST_SENTENCE);
            performance.measure(FIRST_SENTENCE, { start: started, end: performance.now() });
          });
        }
        addSentence(fresh, item, at);
      };
      while (!finished) {
        const { value, done } = await reader.read();
        if (ctl.signal.aborted) return;
        pending += decoder.decode(value || new Uint8Array(), { stream: !done });
        let cut;
        while (!finished && (cut = pending.indexOf("\n")) >= 0) {
          handle(pending.slice(0, cut));
          pending = pending.slice(cut + 1);
        }
        if (done) {
          if (!finished) handle(pending);
          if (!finished) say("The answer ended early; type to try again.", true);
          break;
        }
      }
      if (finished) reader.cancel().catch(() => {});
      if (fresh !== null) renderBackdrop();
    } catch (error) {
      if (ctl.signal.aborted || (error && error.name === "AbortError")) return;
      say(`Cannot reach the server: ${error && error.message ? error.message : error}`, true);
    } finally {
      if (controller === ctl) controller = null;
      if (controller === null) ui.output.setAttribute("aria-busy", "false");
    }
  }

  /** Append one streamed sentence to the output, as render() in core/translator.py joins them. */
  function addSentence(sentences, item, at) {
    const last = sentences[sentences.length - 1];
    if (last && (last.separator.includes("\n") || !last.text)) {
      ui.output.append(document.createTextNode(last.separator));
    }
    const span = document.createElement("span");
    const doubtful = typeof item.score === "number" && item.score < DOUBTFUL_SCORE;
    span.className = "sentence" + (doubtful ? " doubtful" : "");
    span.dataset.i = String(sentences.length);
    span.textContent = item.text;
    if (doubtful) span.title = "The model is unsure of this translation";
    ui.output.append(span);
    const [start, end] = Array.isArray(item.span) ? item.span : [0, 0];
    sentences.push({ start: at(start), end: at(end), text: item.text, separator: item.separator || "",
      doubtful, out: span, src: null });
    ui.copy.disabled = false;
    renderBackdrop();
  }

  function finish(sentences, text) {
    if (sentences === null) {  // only blank sentences
      shown = { text, sentences: [] };
      ui.output.replaceChildren();
      ui.output.classList.remove("stale");
      return;
    }
    const last = sentences[sentences.length - 1];
    if (last && last.separator) ui.output.append(document.createTextNode(last.separator));
    const doubtful = sentences.filter((s) => s.doubtful).length;
    say(doubtful ? `${doubtful} of ${sentences.length} sentences are shaded: the model is unsure of them.` : "");
    if (text.length <= 80 && TERM.test(text) && /\p{L}/u.test(text)) showEntries(text);
  }

  // -- the dictionary's entries of a lone word or term --------------------------------------------
  function clearEntries() {
    ui.entries.replaceChildren();
    ui.entries.hidden = true;
  }

  async function showEntries(term) {
    const query = new URLSearchParams({ term });
    if (target) query.set("target", target);
    let answer;
    try {
      const response = await fetch(`v1/lookup?${query}`, { headers: authHeaders() });
      if (!response.ok) return;
      answer = await response.json();
    } catch { return; }
    if (ui.source.value !== term || !answer.entries.length) return;  // the text changed meanwhile
    const list = document.createElement("dl");
    for (const entry of answer.entries.slice(0, 8)) {
      const head = document.createElement("dt");
      const word = document.createElement("span");
      word.className = "headword";
      word.lang = target || "zh-Hans";
      word.textContent = entry.headword;
      const reading = document.createElement("span");
      reading.className = "pinyin";
      reading.textContent = entry.pinyin;
      head.append(word, " ", reading);
      const glosses = document.createElement("dd");
      glosses.textContent = entry.glosses.join("; ");
      list.append(head, glosses);
    }
    const title = document.createElement("p");
    title.className = "entries-title";
    title.textContent = `Dictionary: ${term.trim()}`;
    ui.entries.replaceChildren(title, list);
    ui.entries.hidden = false;
  }

  // -- copy and the script ---------------------------------------------------------------------
  ui.copy.addEventListener("click", async () => {
    const text = ui.output.textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {  // no clipboard API outside HTTPS (a phone on the local network): select and copy
      const range = document.createRange();
      range.selectNodeContents(ui.output);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      const copied = document.execCommand("copy");
      if (!copied) { say("Press Ctrl+C (or long-press) to copy the selected translation."); return; }
      selection.removeAllRanges();
    }
    say("Copied the translation.");
  });

  function setTarget(value) {
    target = value;
    ui.output.lang = value || "zh-Hans";
  }

  ui.target.addEventListener("change", () => {
    setTarget(ui.target.value);
    store(TARGET_STORE, ui.target.value);
    if (ui.source.value.trim()) translateNow();
  });

  // -- documents -------------------------------------------------------------------------------
  const queue = [];
  let uploading = false;

  function newJob(file) {
    const li = document.createElement("li");
    li.className = "job";
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = file.name;
    const progress = document.createElement("progress");
    progress.hidden = true;
    progress.setAttribute("aria-label", `Progress of ${file.name}`);
    const state = document.createElement("span");
    state.className = "state";
    state.textContent = "Waiting to upload";
    const actions = document.createElement("div");
    actions.className = "actions";
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "quiet";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    actions.append(remove);
    li.append(name, progress, state, actions);
    ui.jobs.append(li);
    const job = { file, li, progress, state, actions, id: "", url: "", removed: false, failures: 0 };
    remove.addEventListener("click", () => removeJob(job));
    return job;
  }

  function removeJob(job) {
    job.removed = true;
    if (job.url) URL.revokeObjectURL(job.url);
    if (job.id) {
      fetch(`v1/documents/${encodeURIComponent(job.id)}`, { method: "DELETE", headers: authHeaders() })
        .catch(() => {});
    }
    const next = job.li.nextElementSibling || job.li.previousElementSibling;
    job.li.remove();
    (next ? next.querySelector("button") : ui.files).focus();
  }

  function fail(job, message) {
    job.li.classList.add("error");
    job.progress.hidden = true;
    job.state.textContent = message;
    announce(`${job.file.name}: ${message}`);
  }

  function announce(message) {
    const live = $("documents-status");
    live.textContent = message;
  }

  function show(job, info) {
    const total = Number(info.sentences_total) || 0;
    const done = Number(info.sentences_done) || 0;
    if (info.status === "queued") {
      job.state.textContent = "Waiting in the queue";
    } else if (info.status === "translating") {
      job.state.textContent = total ? `Translating: ${done} of ${total} sentences` : "Translating";
    }
    if (total) {
      job.progress.hidden = false;
      job.progress.max = total;
      job.progress.value = Math.min(done, total);
    }
  }

  function addFiles(files) {
    if (settings.keyRequired && !apiKey()) askForKey();
    for (const file of files) queue.push(newJob(file));
    pump();
  }

  async function pump() {
    if (uploading) return;
    uploading = true;
    try {
      while (queue.length) {
        const job = queue.shift();
        if (!job.removed) await upload(job);
      }
    } finally {
      uploading = false;
    }
  }

  async function upload(job) {
    job.state.textContent = "Uploading";
    const form = new FormData();
    form.append("file", job.file, job.file.name);
    if (target) form.append("target", target);
    let response;
    try {
      response = await fetch("v1/documents", { method: "POST", headers: authHeaders(), body: form });
    } catch (error) {
      fail(job, `Cannot reach the server: ${error && error.message ? error.message : error}`);
      return;
    }
    if (!response.ok) {
      const message = await errorText(response);
      if (response.status === 403) askForKey(message.charAt(0).toUpperCase() + message.slice(1) + ".");
      fail(job, message);
      return;
    }
    const info = await response.json();
    job.id = String(info.id);
    show(job, info);
    follow(job, info);
  }

  function follow(job, info) {
    if (job.removed) return;
    if (info.status === "done") { download(job, info); return; }
    if (info.status === "error") { fail(job, info.error || "the translation failed"); return; }
    setTimeout(() => poll(job), POLL_MS);
  }

  async function poll(job) {
    if (job.removed) return;
    try {
      const response = await fetch(`v1/documents/${encodeURIComponent(job.id)}`, { headers: authHeaders() });
      if (!response.ok) { fail(job, await errorText(response)); return; }
      const info = await response.json();
      job.failures = 0;
      show(job, info);
      follow(job, info);
    } catch {
      job.failures += 1;
      if (job.failures >= POLL_FAILURES) { fail(job, "Lost contact with the server."); return; }
      setTimeout(() => poll(job), POLL_MS * 2 ** job.failures);
    }
  }

  function filename(response, fallback) {
    const header = response.headers.get("Content-Disposition") || "";
    const encoded = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header);
    if (encoded) {
      try { return decodeURIComponent(encoded[1].trim()); } catch { /* fall through */ }
    }
    const plain = /filename\s*=\s*"([^"]+)"/i.exec(header) || /filename\s*=\s*([^;]+)/i.exec(header);
    return plain ? plain[1].trim() : fallback;
  }

  async function download(job, info) {
    job.state.textContent = "Fetching the translation";
    let response;
    try {
      response = await fetch(`v1/documents/${encodeURIComponent(job.id)}/result`, { headers: authHeaders() });
      if (!response.ok) { fail(job, await errorText(response)); return; }
      const blob = await response.blob();
      if (job.removed) return;
      job.url = URL.createObjectURL(blob);
      const name = filename(response, info.name || job.file.name);
      const link = document.createElement("a");
      link.href = job.url;
      link.download = name;
      link.textContent = `Download ${name}`;
      job.actions.prepend(link);
      job.li.classList.add("done");
      const total = Number(info.sentences_total) || 0;
      job.progress.hidden = !total;
      if (total) { job.progress.max = total; job.progress.value = total; }
      job.state.textContent = total ? `Done: ${total} sentences translated` : "Done";
      announce(`${job.file.name}: translated`);
    } catch (error) {
      fail(job, `Cannot fetch the translation: ${error && error.message ? error.message : error}`);
    }
  }

  ui.files.addEventListener("change", () => {
    addFiles([...ui.files.files]);
    ui.files.value = "";
  });

  const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes("Files");
  ui.drop.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    ui.drop.classList.add("over");
  });
  ui.drop.addEventListener("dragleave", () => ui.drop.classList.remove("over"));
  ui.drop.addEventListener("drop", (event) => {
    event.preventDefault();
    ui.drop.classList.remove("over");
    if (!ui.drop.hidden && event.dataTransfer.files.length) addFiles([...event.dataTransfer.files]);
  });
  // a file dropped next to the zone is not opened in place of the page
  window.addEventListener("dragover", (event) => { if (carriesFiles(event)) event.preventDefault(); });
  window.addEventListener("drop", (event) => { if (carriesFiles(event)) event.preventDefault(); });

  // -- start -----------------------------------------------------------------------------------
  async function getJSON(path) {
    const response = await fetch(path, { headers: authHeaders() });
    if (!response.ok) throw new Error(await errorText(response));
    return response.json();
  }

  async function start() {
    const live = document.createElement("p");
    live.id = "documents-status";
    live.className = "visually-hidden";
    live.setAttribute("role", "status");
    ui.jobs.after(live);
    autosize();
    updateCount();
    renderBackdrop();
    const [found, health] = await Promise.all([
      getJSON("frontend/settings").catch((error) => {
        say(`Cannot read the server's settings: ${error.message}`, true);
        return null;
      }),
      getJSON("health").catch(() => null),
    ]);
    if (found) {
      settings.charLimit = Number(found.charLimit) || -1;
      settings.keyRequired = Boolean(found.keyRequired);
      settings.filesTranslation = found.filesTranslation !== false;
      settings.formats = Array.isArray(found.supportedFilesFormat) ? found.supportedFilesFormat : [];
    }
    updateCount();
    ui.keyButton.hidden = !(settings.keyRequired || apiKey());
    if (settings.keyRequired && !apiKey()) askForKey();
    ui.drop.hidden = !settings.filesTranslation;
    ui.documentsOff.hidden = settings.filesTranslation;
    if (settings.formats.length) {
      const formats = settings.formats.map((f) => "." + String(f).replace(/^\./, ""));
      ui.files.accept = formats.join(",");
      ui.formats.textContent = `or drop them here: ${formats.join(", ")}.`;
    }
    const offered = health && Array.isArray(health.targets) ? health.targets : [];
    if (offered.includes("zh-Hans") && offered.includes("zh-Hant")) {
      const saved = (() => { try { return localStorage.getItem(TARGET_STORE); } catch { return null; } })();
      ui.target.value = offered.includes(saved) ? saved : offered[0];
      ui.target.hidden = false;
      ui.targetLabel.hidden = false;
      setTarget(ui.target.value);
    } else {
      setTarget(offered[0] || "");
    }
    if (ui.source.value.trim()) translateNow();
  }

  start();
})();
