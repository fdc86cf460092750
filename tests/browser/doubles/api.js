// Test double of Agent Zero's /js/api.js: callJsonApi POSTs JSON to /api<endpoint> and throws on HTTP errors.
export async function callJsonApi(endpoint, data) {
  const response = await fetch("/api" + endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(data),
  });
  if (!response.ok) throw new Error(await response.text());
  return await response.json();
}
