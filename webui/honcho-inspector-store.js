// Honcho Memory Hub's memory inspector: what Honcho holds about the user (the agent's card of them, its
// conclusions, the local record of memory writes, the base pack a turn gets), with forget (after a confirm
// step), undo of a recent forget, a card edit, and the memory file: an export downloaded as a file, an
// import of one (a dry run first). Everything here is recalled data, already redacted by the
// plugin: it is shown as text only (x-text, and toasts through honcho-toast.js, which escapes them), held
// only while the inspector is open (closing it empties this store), never written to browser storage, and
// fetched with cache: "no-store" (the answer says no-store too).
import { createStore } from "/js/AlpineStore.js";
import { fetchApi } from "/js/api.js";
import {
  toastError,
  toastSuccess,
} from "/plugins/honcho/webui/honcho-toast.js";

const API = "/plugins/honcho/honcho_inspector";
// The largest memory file sent for import (ops/memory_file.py MAX_FILE_BYTES; the plugin checks again).
const MAX_FILE_BYTES = 16000000;
// While the base pack loads, the open inspector asks for it again this often, at most this many
// times (a minute in all); then it says to reopen. Nothing is asked once it closes.
const BASE_PACK_EVERY_MS = 2000;
const BASE_PACK_TRIES = 30;

function empty() {
  return {
    open: false,
    loading: false,
    error: null, // the whole view could not be read
    label: "",
    peers: null,
    card: null, // { facts, total } or { error }
    conclusions: null, // { items, page, pages, total } or { error }
    writes: null, // { items } or { error }
    basePack: null, // { state, text }
    basePackTries: 0, // how often it was asked again while loading
    basePackTimer: null,
    undoWindowS: 0,
    query: "",
    results: null, // a search's items; null when not searching
    searching: false,
    confirming: null, // the id of the conclusion whose forget waits for its confirm click
    busy: null, // the action running: forget, undo, card, correct, rebuild
    editing: false,
    cardDraft: "",
    fileText: null, // the chosen memory file's text, held until the inspector closes
    fileName: "",
    importReport: null, // the last import's (or dry run's) report, its message shown as text
    rememberText: "", // a fact to remember, and for how long ("" = for good; else "1h", "7d"…)
    rememberFor: "",
    ...corrections(),
  };
}

// What the corrections hold: the open correction, the evidence shown, the level listed.
function corrections() {
  return {
    level: "", // the level listed; "" for every conclusion
    levelPage: 1, // the page of that listing shown, of levelPages
    levelPages: 0,
    correcting: null, // the id of the conclusion whose correction is open
    correction: "",
    evidenceFor: null, // the id of the conclusion whose evidence is shown
    evidence: null,
    evidenceError: null,
    said: null, // the chat's messages before that conclusion was made
    fixingFact: false,
    factChosen: "",
    factCorrection: "",
    rebuilding: false,
  };
}

// One request: POST with Agent Zero's CSRF header, never answered from or kept in a browser cache.
async function ask(body) {
  const context = globalThis.getContext ? globalThis.getContext() : null;
  const response = await fetchApi(API, {
    method: "POST",
    cache: "no-store",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, context }),
  });
  if (!response || !response.ok) throw new Error("The inspector could not reach Agent Zero");
  return await response.json();
}

export const store = createStore("honchoInspector", {
  ...empty(),

  async onOpen() {
    Object.assign(this, empty(), { open: true });
    await this.load(1);
  },

  // Closing the inspector drops every recalled text it held, and stops asking for the base pack.
  onClose() {
    clearTimeout(this.basePackTimer);
    Object.assign(this, empty());
  },

  get basePackGivenUp() {
    return this.basePackTries >= BASE_PACK_TRIES;
  },

  // One more ask for the base pack, later, while it loads and the inspector is open (one timer).
  _awaitBasePack() {
    clearTimeout(this.basePackTimer);
    this.basePackTimer = null;
    if (!this.open || !this.basePack || this.basePack.state !== "loading" || this.basePackGivenUp) return;
    this.basePackTimer = setTimeout(() => this._askBasePack(), BASE_PACK_EVERY_MS);
  },

  async _askBasePack() {
    this.basePackTimer = null;
    if (!this.open) return;
    this.basePackTries += 1;
    try {
      const answer = await ask({ action: "base_pack" });
      if (this.open && answer.ok && answer.base_pack) this.basePack = answer.base_pack;
    } catch (e) {
      // the next ask, if any is left, tries again
    }
    this._awaitBasePack();
  },

  async load(page) {
    this.loading = true;
    try {
      const answer = await ask({ action: "view", page });
      if (!this.open) return;
      if (!answer.ok) {
        this.error = answer.error || "The inspector is unavailable";
        return;
      }
      this.error = null;
      this.label = answer.label;
      this.peers = answer.peers;
      this.card = answer.card;
      this.conclusions = answer.conclusions;
      this.writes = answer.writes;
      this.basePack = answer.base_pack;
      this.undoWindowS = answer.undo_window_s;
      if (!this.basePackTimer) this._awaitBasePack();
    } catch (e) {
      if (this.open) this.error = "The inspector could not reach Agent Zero";
    } finally {
      this.loading = false;
    }
  },

  get page() {
    return this.conclusions && this.conclusions.page ? this.conclusions.page : 1;
  },

  get shownConclusions() {
    if (this.results !== null) return this.results;
    return this.conclusions && this.conclusions.items ? this.conclusions.items : [];
  },

  async search() {
    if (!this.query.trim()) return this.clearSearch();
    Object.assign(this, { level: "", levelPages: 0 }); // a search's results are of every level
    this.searching = true;
    try {
      const answer = await ask({ action: "search", query: this.query });
      if (!this.open) return;
      if (answer.ok) this.results = answer.items;
      else toastError(answer.message || answer.error || "Search failed", "Honcho memory");
    } catch (e) {
      toastError(e.message, "Honcho memory");
    } finally {
      this.searching = false;
    }
  },

  clearSearch() {
    this.query = "";
    this.results = null;
    Object.assign(this, { level: "", levelPage: 1, levelPages: 0 });
  },

  // -- corrections, with what evidence there is --------------------------------------------------

  async showLevel(page = 1) {
    if (!this.level) return this.clearSearch();
    this.query = "";
    this.searching = true;
    try {
      const answer = await ask({ action: "level", level: this.level, page });
      if (!this.open) return;
      if (answer.items) {
        this.results = answer.items;
        Object.assign(this, { levelPage: answer.page, levelPages: answer.pages });
      } else toastError(answer.error || "Listing failed", "Honcho memory");
    } catch (e) {
      toastError(e.message, "Honcho memory");
    } finally {
      this.searching = false;
    }
  },

  askCorrect(item) {
    this.correcting = item.id;
    this.correction = item.text;
  },

  // Sent only from the correction's Replace button: the API refuses one without `confirmed: true`.
  async confirmCorrect(id) {
    const done = await this._write("correct", { action: "correct", id, content: this.correction,
                                                confirmed: true });
    if (done) {
      this.correcting = null;
      if (this.results !== null) this.results = this.results.filter((item) => item.id !== id);
    }
  },

  async toggleEvidence(id) {
    const opening = this.evidenceFor !== id;
    Object.assign(this, { evidenceFor: opening ? id : null, evidence: null, evidenceError: null,
                          said: null });
    if (!opening) return;
    try {
      const answer = await ask({ action: "evidence", id });
      if (this.evidenceFor !== id) return;
      if (answer.ok) this.evidence = answer;
      else this.evidenceError = answer.message || answer.error || "The evidence is unavailable";
    } catch (e) {
      if (this.evidenceFor === id) this.evidenceError = e.message;
    }
  },

  async loadMessages(id) {
    try {
      const answer = await ask({ action: "messages", id });
      if (this.evidenceFor !== id) return;
      this.said = answer.ok ? answer : { message: answer.message || answer.error, items: [] };
    } catch (e) {
      toastError(e.message, "Honcho memory");
    }
  },

  startFactFix() {
    this.factChosen = this.card.facts[0];
    this.factCorrection = this.factChosen;
    this.fixingFact = true;
  },

  async confirmFactFix() {
    const body = { action: "correct_fact", fact: this.factChosen, content: this.factCorrection,
                   confirmed: true };
    if (await this._write("correct", body)) this.fixingFact = false;
  },

  async rebuildCard() {
    if (await this._write("rebuild", { action: "rebuild_card", confirmed: true })) this.rebuilding = false;
  },

  askForget(id) {
    this.confirming = id;
  },

  cancelForget() {
    this.confirming = null;
  },

  // Sent only from the confirm step's button: the API refuses a forget without `confirmed: true`.
  async confirmForget(id) {
    await this._write("forget", { action: "forget", id, confirmed: true });
    this.confirming = null;
    if (this.results !== null) this.results = this.results.filter((item) => item.id !== id);
  },

  async undo(id) {
    await this._write("undo", { action: "undo", id });
  },

  // A fact remembered from here, for good or for a while (the tool's remember: bounds, redaction).
  async remember() {
    const text = this.rememberText.trim();
    if (!text) return;
    const body = { action: "remember", text, expires_in: this.rememberFor || null };
    if (await this._write("remember", body)) this.rememberText = "";
  },

  // Its lifetime removed: the conclusion stays until forgotten.
  async pin(id) {
    await this._write("pin", { action: "pin", id });
  },

  // The time left of an expiring conclusion when the view was read, in its largest units.
  timeLeft(item) {
    const s = Math.round(item.expires_in_s || 0);
    if (s >= 86400) return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
    if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return s >= 60 ? `${Math.floor(s / 60)} min` : "less than a minute";
  },

  startEdit() {
    this.cardDraft = this.card && this.card.facts ? this.card.facts.join("\n") : "";
    this.editing = true;
  },

  cancelEdit() {
    this.editing = false;
    this.cardDraft = "";
  },

  async saveCard() {
    const facts = this.cardDraft.split("\n").map((line) => line.trim()).filter((line) => line);
    if (await this._write("card", { action: "edit_card", facts })) this.cancelEdit();
  },

  // The export offered as a file: its text goes from the answer into a Blob the browser saves; the
  // name is set as a property, never as markup.
  async exportFile(format) {
    if (this.busy) return;
    this.busy = "export";
    try {
      const answer = await ask({ action: "export", format });
      if (!answer.ok) {
        toastError(answer.message || answer.error || "Export failed", "Honcho memory");
        return;
      }
      const url = URL.createObjectURL(new Blob([answer.content], { type: answer.media_type }));
      const link = document.createElement("a");
      link.href = url;
      link.download = answer.filename;
      link.hidden = true;
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      (answer.complete ? toastSuccess : toastError)(answer.message, "Honcho memory");
    } catch (e) {
      toastError(e.message, "Honcho memory");
    } finally {
      this.busy = null;
    }
  },

  // A chosen file is read and checked by a dry run, which says what the import would create.
  async chooseFile(event) {
    const file = event.target.files && event.target.files[0];
    event.target.value = ""; // the same file may be chosen again
    this.fileText = null;
    this.importReport = null;
    if (!file) return;
    if (file.size > MAX_FILE_BYTES) {
      this.importReport = { message: `Not imported: the file is larger than ${MAX_FILE_BYTES} bytes.` };
      return;
    }
    const text = await file.text();
    if (!this.open) return;
    this.fileText = text;
    this.fileName = file.name;
    await this.runImport(true);
  },

  async runImport(dryRun) {
    if (this.busy || this.fileText === null) return;
    this.busy = "import";
    try {
      const answer = await ask({ action: "import", file: this.fileText, dry_run: dryRun });
      if (!this.open) return;
      const message = answer.message || answer.error || "The import failed";
      this.importReport = { ...answer, message };
      if (!dryRun) (answer.ok ? toastSuccess : toastError)(message.split("\n")[0], "Honcho memory");
    } catch (e) {
      toastError(e.message, "Honcho memory");
    } finally {
      this.busy = null;
    }
    if (!dryRun && this.open) await this.load(this.page);
  },

  // A write, its toast, then the view read again; whether it was done.
  async _write(kind, body) {
    if (this.busy) return false;
    this.busy = kind;
    let done = false;
    try {
      const answer = await ask(body);
      done = !!answer.ok;
      const message = answer.message || answer.error || "Done";
      (done ? toastSuccess : toastError)(message, "Honcho memory");
    } catch (e) {
      toastError(e.message, "Honcho memory");
    } finally {
      this.busy = null;
    }
    if (this.open) await this.load(this.page);
    return done;
  },

  // A chat's name as Agent Zero's chat list shows it, else its id.
  chatName(id) {
    const chats = globalThis.Alpine ? globalThis.Alpine.store("chats") : null;
    const found = chats && chats.contexts ? chats.contexts.find((c) => c.id === id) : null;
    return found && found.name ? found.name : id;
  },

  when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  },
});
