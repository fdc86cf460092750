// Test double of Agent Zero's toast module: records every toast and shows it.
window.__toasts = [];

function toast(kind) {
  return (message, title = "") => {
    window.__toasts.push({ kind, message, title });
    const element = document.createElement("div");
    element.className = "toast toast-" + kind;
    element.textContent = (title ? title + ": " : "") + message;
    document.getElementById("toasts")?.appendChild(element);
  };
}

export const toastFrontendSuccess = toast("success");
export const toastFrontendError = toast("error");
export const toastFrontendWarning = toast("warning");
export const toastFrontendInfo = toast("info");
