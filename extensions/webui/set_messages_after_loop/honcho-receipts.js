// Honcho Memory Hub receipts in the chat (docs/reference.md, "Receipts"). A recalled turn logs an
// "info" item whose id starts with honcho-receipt-: Agent Zero draws it as a step of the turn, its
// heading and rows in counts. After each batch of messages Agent Zero draws, this finds those steps;
// the first time one is expanded, it asks the inspector's API for the pack that turn got (masked and
// redacted) and shows it, or says that it is no longer cached. Everything is set as text.
import { callJsonApi } from "/js/api.js";

const INSPECTOR_API = "/plugins/honcho/honcho_inspector";
const PREFIX = "honcho-receipt-";
const BOX_CLASS = "honcho-receipt-pack";

const TEXTS = {
  loading: "Fetching the memory pack this turn got…",
  empty: "This turn got no memory pack.",
  expired: "This pack is no longer cached: it is kept for the recall cache's lifetime " +
    "(cache_ttl_s) and dropped when the cache is cleared or a chat is forgotten. " +
    "The counts above stay.",
  hidden: "This pack could not be made safe to show.",
};

// The chat Agent Zero shows (its Alpine store "chats"), read at run time as the sidebar does.
function selectedChat() {
  const chats = globalThis.Alpine ? globalThis.Alpine.store("chats") : null;
  return (chats && chats.selected) || null;
}

export default async function honchoReceipts(context) {
  for (const entry of (context && context.results) || []) {
    const id = entry && entry.args && typeof entry.args.id === "string" ? entry.args.id : "";
    const step = entry && entry.result && entry.result.step;
    if (!id.startsWith(PREFIX) || !(step instanceof Element) || step.dataset.honchoReceipt) continue;
    step.dataset.honchoReceipt = id.slice(PREFIX.length);
    const opened = () => {
      if (step.classList.contains("expanded")) showPack(step);
    };
    new MutationObserver(opened).observe(step, { attributes: true, attributeFilter: ["class"] });
    opened();
  }
}

// The box under the step's rows where the pack goes (made once).
function packBox(step) {
  let box = step.querySelector("." + BOX_CLASS);
  if (!box) {
    box = document.createElement("pre");
    box.className = BOX_CLASS;
    box.style.whiteSpace = "pre-wrap";
    box.style.wordBreak = "break-word";
    box.style.margin = "0.5em 0 0";
    const place = step.querySelector(".process-step-detail-scroll") || step;
    place.appendChild(box);
  }
  return box;
}

async function showPack(step) {
  const state = step.dataset.honchoReceiptState;
  if (state && state !== "error") return; // fetched once; an error may be tried again
  step.dataset.honchoReceiptState = "loading";
  const box = packBox(step);
  box.textContent = TEXTS.loading;
  let answer;
  try {
    answer = await callJsonApi(INSPECTOR_API, {
      action: "receipt", receipt: step.dataset.honchoReceipt, context: selectedChat(),
    });
  } catch (error) {
    answer = { ok: false, error: "the request failed" };
  }
  if (!answer || !answer.ok) {
    step.dataset.honchoReceiptState = "error";
    box.textContent = "The pack could not be fetched: " + String((answer && answer.error) || "no answer");
    return;
  }
  step.dataset.honchoReceiptState = String(answer.state);
  box.textContent = answer.state === "ready"
    ? "The memory pack this turn got (secrets masked):\n\n" + String(answer.text || "")
    : TEXTS[answer.state] || String(answer.state);
}
