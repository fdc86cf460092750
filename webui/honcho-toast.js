// The plugin's toasts. Agent Zero renders a toast's message, and the same message in its
// notification history, as HTML (its webui/components/notifications/ binds them as markup), while
// what we show comes from Honcho, an endpoint (an MCP server names itself), a chat (ids are free
// text) or a user: every message is escaped here, once, so it reaches the page as text, its line
// breaks kept (the forget answer has several lines). Agent Zero renders the title as text: it is
// passed as is.
import {
  toastFrontendError,
  toastFrontendInfo,
  toastFrontendSuccess,
  toastFrontendWarning,
} from "/components/notifications/notification-store.js";

const ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

// `text` as HTML that shows exactly that text, line by line.
export function asHtmlText(text) {
  return String(text).replace(/[&<>"']/g, (char) => ENTITIES[char]).replace(/\r?\n/g, "<br>");
}

export const toastInfo = (message, title) => toastFrontendInfo(asHtmlText(message), title);
export const toastSuccess = (message, title) => toastFrontendSuccess(asHtmlText(message), title);
export const toastWarning = (message, title) => toastFrontendWarning(asHtmlText(message), title);
export const toastError = (message, title) => toastFrontendError(asHtmlText(message), title);
