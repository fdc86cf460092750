// Test double of Agent Zero's /js/AlpineStore.js: the store lives in Alpine once Alpine is up.
export function createStore(name, initialState) {
  if (globalThis.Alpine) globalThis.Alpine.store(name, initialState);
  else document.addEventListener("alpine:init", () => globalThis.Alpine.store(name, initialState));
  return new Proxy(initialState, {
    get: (target, prop) => (globalThis.Alpine?.store(name) ?? target)[prop],
    set: (target, prop, value) => { (globalThis.Alpine?.store(name) ?? target)[prop] = value; return true; },
  });
}
