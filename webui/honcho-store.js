// Honcho Memory Hub sidebar store: a live health line, the status panel, the user's card, the five
// operator actions and Purge (before an uninstall: a confirmation in the panel, counts only). Collapsed, the line polls a light status (local state only: no request to Honcho) every
// 30 s; open, the panel polls the full status (with the shown chat's scope progress) every 5 s, and the
// card (a request to Honcho) when it opens and at most once a minute while it stays open. No poll starts while
// the last one is still running. The open panel also opens the memory inspector
// (webui/honcho-inspector.html) in Agent Zero's modal, and shows and switches "Don't remember this chat" for
// the chat selected in Agent Zero (its chats store's `selected`, read at run time: see selectedChat).
import { createStore } from "/js/AlpineStore.js";
import { callJsonApi } from "/js/api.js";
import { openModal } from "/js/modals.js";
import {
  toastError,
  toastInfo,
  toastSuccess,
  toastWarning,
} from "/plugins/honcho/webui/honcho-toast.js";

const STATUS_API = "/plugins/honcho/honcho_status";
const ACTION_API = "/plugins/honcho/honcho_action";
const CARD_API = "/plugins/honcho/honcho_card";
const FORGET_API = "/plugins/honcho/honcho_forget";
const REMEMBER_API = "/plugins/honcho/honcho_remember";
const PURGE_API = "/plugins/honcho/honcho_purge";
const INSPECTOR = "/plugins/honcho/webui/honcho-inspector.html";
const OPEN_REFRESH_MS = 5000;
const COLLAPSED_REFRESH_MS = 30000;
const CARD_REFRESH_MS = 60000;

// The chat Agent Zero shows, from its Alpine store "chats" (null without one). Read through Alpine, not
// imported from the store's module: a version of Agent Zero that moves that file would otherwise stop
// this whole module from loading, line and panel with it.
function selectedChat() {
  const chats = globalThis.Alpine ? globalThis.Alpine.store("chats") : null;
  return (chats && chats.selected) || null;
}

// The selected chat's state read on its way, and whether a read was asked for meanwhile. Kept out of the
// store: the panel's x-effect calls refreshChatMemory, and a store field it read there would make the
// effect run again each time a read ends.
const chatMemoryRead = { running: false, again: false };

export const ACTIONS = [
  { id: "check", label: "Test API + MCP" },
  { id: "wake", label: "Wake worker" },
  { id: "drain", label: "Drain 5 s" },
  { id: "retry_dead", label: "Retry dead" },
  { id: "clear_cache", label: "Clear cache" },
];

// The word the collapsed line says for each health colour of the status (honcho_hub/ops/status.py).
const STATE_WORDS = { green: "ok", amber: "degraded", red: "down", neutral: "waiting" };

// A check that ran can still have failed: the API failing is an error, only the MCP server a warning.
// No MCP server to check (self-hosted without an MCP URL) is neither: the toast is neutral.
// A wake that a hold refused started nothing: a warning, not a success.
function toastFor(action, result) {
  if (action === "wake") return result.held ? toastWarning : toastSuccess;
  if (action !== "check") return toastSuccess;
  if (!result.api.ok) return toastError;
  if (result.mcp.state === "not_configured") return toastInfo;
  return result.mcp.ok ? toastSuccess : toastWarning;
}

function describe(action, result) {
  switch (action) {
    case "check":
      return `API ${result.api.ok ? "ok" : "failed (" + result.api.error + ")"} in ${result.api.latency_ms} ms · ` +
        `MCP ${result.mcp.summary || (result.mcp.ok ? "ok" : "failed (" + result.mcp.error + ")")}` +
        (result.mcp.state === "not_configured" ? "" : ` in ${result.mcp.latency_ms} ms`);
    case "wake": {
      const paused = result.paused ? `, paused (${result.paused})` : "";
      if (result.woken) return `Worker woken${paused}`;
      if (result.started) return `Worker started${paused}`;
      if (result.held) return "Worker held stopped (an update, a switch-off, an uninstall or a purge); not started";
      return "The previous worker is still stopping; a new one starts when it has";
    }
    case "drain":
      return `Delivered ${result.delivered}, ${result.pending} still pending`;
    case "retry_dead":
      return `Requeued ${result.requeued} dead letters`;
    case "clear_cache":
      return `Cleared ${result.cleared} cached memory packs`;
    default:
      return "Done";
  }
}

// What a purge would remove, from its survey's counts (numbers only: no path, no queued text).
export function purgeSummary(survey) {
  if (!survey.outbox && !survey.journal_files && !survey.marker) return "Nothing to purge on this machine.";
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const parts = [];
  if (survey.outbox) {
    parts.push(`the outbox (${survey.delivered} delivered, ${survey.pending} pending, ${survey.sending} sending, ` +
      `${survey.dead} dead, ${plural(survey.memory_records, "memory-tool record", "memory-tool records")})`);
  }
  if (survey.journal_files) parts.push(plural(survey.journal_files, "capture journal file", "capture journal files"));
  if (survey.marker) parts.push("the recall marker");
  return `Purge removes from this machine: ${parts.join(", ")}. Memory in Honcho is kept. Capture and delivery ` +
    "then stop in this Agent Zero until you resume memory or restart it.";
}

// Why a purge must be forced, from the survey's counts; null when it need not be.
export function purgeWarning(survey) {
  const waiting = survey.pending + survey.sending + survey.in_journal;
  const notes = [];
  if (waiting) {
    notes.push(`${waiting} ${waiting === 1 ? "message has" : "messages have"} not reached Honcho yet: a purge ` +
      `deletes ${waiting === 1 ? "it" : "them"}.`);
  }
  if (survey.live_processes) {
    const one = survey.live_processes === 1;
    notes.push(`${survey.live_processes} other ${one ? "process uses" : "processes use"} the outbox now.`);
  }
  return notes.length ? notes.join(" ") : null;
}

// What a removal left of an offer: what it names as not removed (the plugin offers that again);
// null when nothing waits any more (all removed, or the offer gone with a restart of Agent Zero).
function stillLeft(left, result) {
  if (!result || !result.not_removed || !result.not_removed.length) return null;
  const ids = new Set(result.not_removed.map((failed) => failed.conclusion));
  const cards = new Set(result.not_removed.map((failed) => failed.card));
  const kept = {
    ...left,
    conclusions: left.conclusions.filter((c) => ids.has(c.id)),
    card_facts: left.card_facts.filter((f) => cards.has(`${f.observer} about ${f.observed}`)),
  };
  return kept.conclusions.length || kept.card_facts.length ? kept : null;
}

export const store = createStore("honchoHub", {
  status: null,
  error: null,
  open: false,
  running: null,
  actions: ACTIONS,
  card: null, // { facts: [...], total } once read
  cardError: null,
  forgetOffers: [], // chats deleted in Agent Zero whose forgetting in Honcho is offered, never forced
  forgetting: null,
  // What the last forget in this page left in Honcho (derived conclusions, matching card facts), offered
  // for removal: { chat, conclusions, card_facts, more }, or null.
  leftovers: null,
  removingLeftovers: false,
  // The selected chat's { chat, state ("remember", "no-capture" or "off"), sender (its sender_peers key, or null),
  // thisIsMe (whether "This is me" is offered: a sender sender_peers does not map, never a group) }.
  chatMemory: null,
  chatMemoryError: null,
  settingMemory: false,
  // The open purge confirmation: { survey (counts), force, running, refusal (the server's text) }; null when closed.
  purge: null,
  // The open "Existing sessions" check: { report (a page of ops/observation.py's report, its text lines
  // included), running, error }; null when closed. Apply is the panel's confirmation of the check it shows.
  presets: null,
  resuming: false,
  _cardAt: null, // when the card was last asked for (Date.now())
  _cardLoading: false,
  _statusLoading: false, // a status request is on its way: no other starts until it has answered
  _statusAgain: false, // a refresh asked for meanwhile (open, close, an action): sent once that one answered
  _timer: null,

  get health() {
    if (this.status) return this.status.health;
    return this.error ? "red" : "unknown";
  },

  // The open confirmation's words, from its survey's counts.
  get purgeText() {
    return this.purge ? purgeSummary(this.purge.survey) : "";
  },

  get purgeForceText() {
    return this.purge ? purgeWarning(this.purge.survey) : null;
  },

  // Purged in this Agent Zero (status says so): capture paused until Resume.
  get purged() {
    return !!(this.status && this.status.capture && this.status.capture.purged);
  },

  // The collapsed line: a state word that always fits Agent Zero's 250 px sidebar, then why in a few
  // words (the first reason up to its detail, wrapped, never cut); its tooltip (lineTitle) has them all.
  get stateWord() {
    if (this.error) return "unknown";
    if (!this.status) return "checking…";
    return STATE_WORDS[this.status.health] || this.status.health;
  },

  get headline() {
    if (this.error) return this.error;
    if (!this.status) return "";
    const reasons = this.status.health_reasons;
    if (!reasons.length) return `${this.status.queue.pending} queued · worker ${this.status.worker.state}`;
    const first = reasons[0].split(/:|;| \(/)[0];
    return first + (reasons.length > 1 ? ` +${reasons.length - 1} more` : "");
  },

  get lineTitle() {
    if (this.error) return `Honcho memory unknown: ${this.error}`;
    if (!this.status) return "Honcho memory: checking…";
    const reasons = this.status.health_reasons;
    return `Honcho memory ${this.stateWord}: ` + (reasons.length ? reasons.join("; ")
      : `${this.status.queue.pending} queued · worker ${this.status.worker.state}`);
  },

  init() {
    this.refresh();
    this._schedule();
  },

  // One status request at a time: a full status can take check_timeout_s against a slow Honcho, so a poll
  // that comes due while one runs is skipped; a refresh the user asked for (`asked`) follows its answer.
  async refresh(asked = true) {
    if (this._statusLoading) {
      this._statusAgain = this._statusAgain || asked;
      return;
    }
    this._statusLoading = true;
    try {
      const context = globalThis.getContext ? globalThis.getContext() : null;
      const answer = await callJsonApi(STATUS_API, { context, light: !this.open });
      if (answer.ok) {
        this.status = answer.status;
        this.error = null;
      } else {
        this.error = answer.error || "Status unavailable";
      }
    } catch (e) {
      this.error = "Status unavailable";
    } finally {
      this._statusLoading = false;
      if (this._statusAgain) {
        this._statusAgain = false;
        this.refresh();
      }
    }
  },

  // The card, when the panel is open and the last ask is a minute old (or there was none).
  async refreshCard() {
    if (!this.open || this._cardLoading) return;
    if (this._cardAt !== null && Date.now() - this._cardAt < CARD_REFRESH_MS) return;
    this._cardLoading = true;
    this._cardAt = Date.now();
    try {
      const context = globalThis.getContext ? globalThis.getContext() : null;
      const answer = await callJsonApi(CARD_API, { context });
      if (answer.ok) {
        this.card = { facts: answer.facts, total: answer.total };
        this.cardError = null;
      } else {
        this.cardError = "Card unavailable" + (answer.error && answer.error.length < 40 ? ` (${answer.error})` : "");
      }
    } catch (e) {
      this.cardError = "Card unavailable";
    } finally {
      this._cardLoading = false;
    }
  },

  // Offers are local to Agent Zero's process (no request to Honcho): read with the open panel's status.
  async refreshOffers() {
    if (!this.open) return;
    try {
      const answer = await callJsonApi(FORGET_API, { action: "offers" });
      this.forgetOffers = answer.ok ? answer.offers : [];
    } catch (e) {
      this.forgetOffers = [];
    }
  },

  async forgetChat(chat) {
    if (this.forgetting) return;
    if (!globalThis.confirm(`Chat ${chat} was deleted. Forget it in Honcho too? Its queued messages and its ` +
        "Honcho session are deleted for good.")) return;
    this.forgetting = chat;
    try {
      const answer = await callJsonApi(FORGET_API, { action: "forget_chat", chat, confirmed: true });
      (answer.ok ? toastSuccess : toastWarning)(answer.text || answer.error || "Done", "Honcho");
      const left = answer.result && answer.result.leftovers;
      this.leftovers = left && !left.error && (left.conclusions.length || left.card_facts.length)
        ? { chat, conclusions: left.conclusions, card_facts: left.card_facts, more: left.more } : null;
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    } finally {
      this.forgetting = null;
      await this.refreshOffers();
    }
  },

  // Removes what the forget offered, after the user confirmed; what could not be removed stays listed.
  async removeLeftovers() {
    const left = this.leftovers;
    if (!left || this.removingLeftovers) return;
    if (!globalThis.confirm(`Remove from Honcho the ${left.conclusions.length} conclusions derived from chat ` +
        `${left.chat} and the ${left.card_facts.length} card facts matching it? This cannot be undone.`)) return;
    this.removingLeftovers = true;
    try {
      const answer = await callJsonApi(FORGET_API, { action: "forget_leftovers", chat: left.chat, confirmed: true });
      (answer.ok ? toastSuccess : toastWarning)(answer.text || answer.error || "Done", "Honcho");
      this.leftovers = answer.ok ? null : stillLeft(left, answer.result);
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    } finally {
      this.removingLeftovers = false;
    }
  },

  keepLeftovers() {
    this.leftovers = null;
  },

  async dismissOffer(chat) {
    try {
      await callJsonApi(FORGET_API, { action: "dismiss", chat });
    } finally {
      await this.refreshOffers();
    }
  },

  // The selected chat's "Don't remember this chat", read while the panel is open (local to Agent Zero's
  // process: no request to Honcho). The panel calls it again when another chat is selected. One read at a
  // time, as for status: a poll due meanwhile is skipped, a read asked for (`asked`) follows the answer.
  async refreshChatMemory(asked = true) {
    const chat = selectedChat();
    if (!this.open || !chat) {
      this.chatMemory = null;
      this.chatMemoryError = null;
      return;
    }
    if (chatMemoryRead.running) {
      chatMemoryRead.again = chatMemoryRead.again || asked;
      return;
    }
    chatMemoryRead.running = true;
    try {
      const answer = await callJsonApi(REMEMBER_API, { action: "get", chat });
      if (chat !== selectedChat()) return; // another chat was selected meanwhile: read again below
      this.chatMemory = answer.ok ? this._chatMemoryOf(answer) : null;
      this.chatMemoryError = answer.ok ? null : answer.error || "Unavailable";
    } catch (e) {
      this.chatMemory = null;
      this.chatMemoryError = "Unavailable";
    } finally {
      chatMemoryRead.running = false;
      if (chatMemoryRead.again) {
        chatMemoryRead.again = false;
        this.refreshChatMemory();
      }
    }
  },

  async setChatMemory(state) {
    const chat = this.chatMemory && this.chatMemory.chat;
    if (!chat) return;
    await this._changeChatMemory({ action: "set", chat, state }, (answer) => {
      if (answer.ok) this.chatMemory = this._chatMemoryOf(answer);
      else toastError(answer.error || "The chat's memory setting failed", "Honcho");
    });
  },

  // "This is me": the chat's sender (say telegram:12345) named as the owner in sender_peers, after a confirm.
  async thisIsMe() {
    const memory = this.chatMemory;
    if (!memory || !memory.thisIsMe || this.settingMemory) return;
    if (!globalThis.confirm(`Are you ${memory.sender}? Its chats are then remembered as yours and get your ` +
        "memory (sender_peers in the plugin's settings).")) return;
    await this._changeChatMemory({ action: "this_is_me", chat: memory.chat }, (answer) => {
      if (answer.ok) toastSuccess(`${memory.sender} is now you`, "Honcho");
      else toastError(answer.error || "Naming the sender failed", "Honcho");
    });
  },

  // One change of the shown chat's memory (`body` for REMEMBER_API) at a time; `answered(answer)` says how
  // it went. Then the chat's state and status are read again: the change shows in both.
  async _changeChatMemory(body, answered) {
    if (this.settingMemory) return;
    this.settingMemory = true;
    try {
      answered(await callJsonApi(REMEMBER_API, body));
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    } finally {
      this.settingMemory = false;
      await this.refreshChatMemory();
      await this.refresh();
    }
  },

  _chatMemoryOf(answer) {
    return { chat: answer.chat, state: answer.state, sender: answer.sender, thisIsMe: answer.this_is_me };
  },

  toggle() {
    this.open = !this.open;
    this.refresh();
    this.refreshCard();
    this.refreshOffers();
    this._schedule();
  },

  _schedule() {
    clearInterval(this._timer);
    this._timer = setInterval(() => {
      this.refresh(false);
      this.refreshCard();
      this.refreshOffers();
      this.refreshChatMemory(false);
    }, this.open ? OPEN_REFRESH_MS : COLLAPSED_REFRESH_MS);
  },

  openInspector() {
    openModal(INSPECTOR);
  },

  // Purge: read what it would remove, then the panel asks (counts only). A purge with messages not yet sent is
  // refused by Agent Zero unless the user ticks the forced purge; the refusal is shown in the panel as text.
  async startPurge() {
    if (this.purge) return;
    try {
      const answer = await callJsonApi(PURGE_API, { action: "survey" });
      if (answer.ok) this.purge = { survey: answer.survey, force: false, running: false, refusal: null };
      else toastError(answer.error || "Purge unavailable", "Honcho");
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    }
  },

  cancelPurge() {
    if (this.purge && !this.purge.running) this.purge = null;
  },

  async confirmPurge() {
    const purge = this.purge;
    if (!purge || purge.running) return;
    purge.running = true;
    try {
      const answer = await callJsonApi(PURGE_API, { action: "purge", confirmed: true, force: purge.force });
      if (answer.ok) {
        this.purge = null;
        toastSuccess(answer.text, "Honcho");
      } else {
        purge.refusal = answer.text || answer.error || "Not purged";
        if (answer.result) purge.survey = answer.result;
      }
    } catch (e) {
      purge.refusal = "The purge could not reach Agent Zero";
    } finally {
      purge.running = false;
      await this.refresh();
    }
  },

  // Existing sessions: the saved observation preset checked on a page of the sessions this install made (a dry
  // run: how many differ and how); Apply sets it on that page's sessions that differ. Every line is the server's
  // text, shown as text.
  async checkPresets(offset = 0) {
    if (this.presets && this.presets.running) return;
    this.presets = { report: this.presets ? this.presets.report : null, running: true, error: null };
    await this._presets({ action: "observation_check", offset });
  },

  async applyPresets() {
    const presets = this.presets;
    if (!presets || presets.running || !presets.report) return;
    presets.running = true;
    await this._presets({ action: "observation_apply", confirmed: true, offset: presets.report.offset });
  },

  closePresets() {
    if (this.presets && !this.presets.running) this.presets = null;
  },

  async _presets(body) {
    try {
      const answer = await callJsonApi(ACTION_API, body);
      if (answer.ok) this.presets = { report: answer.result, running: false, error: null };
      else this.presets = { report: null, running: false, error: answer.error || "The check failed" };
    } catch (e) {
      this.presets = { report: null, running: false, error: "The check could not reach Agent Zero" };
    }
  },

  async resume() {
    if (this.resuming) return;
    this.resuming = true;
    try {
      const answer = await callJsonApi(PURGE_API, { action: "resume" });
      // A resume another hold keeps stopped started nothing: a warning, as a wake a hold refused.
      if (answer.ok && answer.started) toastSuccess("Memory resumed", "Honcho");
      else if (answer.ok) toastWarning("Resumed; another hold still stops the worker", "Honcho");
      else toastError(answer.error || "Resume failed", "Honcho");
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    } finally {
      this.resuming = false;
      await this.refresh();
    }
  },

  async run(action) {
    if (this.running) return;
    this.running = action;
    try {
      const answer = await callJsonApi(ACTION_API, { action });
      if (answer.ok) toastFor(action, answer.result)(describe(action, answer.result), "Honcho");
      else toastError(answer.error || (answer.result && answer.result.error) || "Action failed", "Honcho");
    } catch (e) {
      toastError("The action could not reach Agent Zero", "Honcho");
    } finally {
      this.running = null;
      await this.refresh();
    }
  },
});
